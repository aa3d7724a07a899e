"""The database of the admission benchmarks (`bench.backfill_365`, `bench.watch_delay`):
dropped, migrated from scratch and given one pipeline with its plan, written straight into
the state tables (no API in the way); and the statement that ends every active run, the
engine's part that these benchmarks do not time, so the next admission finds room."""

from __future__ import annotations

import json
import uuid

import psycopg2

import ddl

PG = "postgresql://postgres@127.0.0.1:5432"
END_ACTIVE = "UPDATE runs SET status = 'succeeded', started_at = now(), finished_at = now()" \
    " WHERE status IN ('queued', 'running')"  # fmt: skip


def fresh_pipeline(db: str, name: str, plan: dict) -> tuple[str, str]:
    """Database `db` made anew with pipeline `name` at revision 1 holding `plan`: its URL and
    the pipeline's id."""
    admin = psycopg2.connect(f"{PG}/postgres")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    admin.close()
    url = f"{PG}/{db}"
    ddl.migrate(url)
    pid = str(uuid.uuid4())
    conn = psycopg2.connect(url)
    with conn, conn.cursor() as cur:
        cur.execute("INSERT INTO pipelines (id, name, revision) VALUES (%s, %s, 1)", (pid, name))
        cur.execute(
            "INSERT INTO revisions (pipeline_id, number, plan, created_by)"
            " VALUES (%s, 1, %s, 'bench')",
            (pid, json.dumps(plan)),
        )
    conn.close()
    return url, pid
