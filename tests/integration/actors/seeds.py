"""State rows written straight into a test's database, for tests of one statement or one
component without a coordinator: a running run of one step."""

from __future__ import annotations

import json
import uuid


def seed_running_run(conn, step: str = "read") -> tuple[str, str]:
    """A pipeline with a one-step plan (an ingest named `step`) and a running run of it whose
    step is running; committed. Returns (pipeline id, run id)."""
    pid, rid = str(uuid.uuid4()), str(uuid.uuid4())
    plan = {"steps": [{"name": step, "type": "ingest",
                       "config": {"source": "file", "path": "p.csv"}}]}  # fmt: skip
    with conn.cursor() as cur:
        cur.execute("INSERT INTO pipelines (id, name, revision) VALUES (%s, %s, 1)", (pid, pid))
        cur.execute(
            "INSERT INTO revisions (pipeline_id, number, plan, created_by) VALUES (%s, 1, %s, 't')",
            (pid, json.dumps(plan)),
        )
        cur.execute(
            "INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id,"
            " created_by) VALUES (%s, %s, 1, 'running', 'k', 't', 't')",
            (rid, pid),
        )
        cur.execute(
            "INSERT INTO step_runs (run_id, name, type, position, status)"
            " VALUES (%s, %s, 'ingest', 0, 'running')",
            (rid, step),
        )
    conn.commit()
    return pid, rid
