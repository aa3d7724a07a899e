"""Retention: purging the intermediate outputs of finished runs (actors/purge.py), on a real
failed run of the engine and on leftovers planted with the real connectors."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg2

import connectors
from actors import purge_finished_runs
from drills import Stack, wait_until

DAY_S = 86400.0


# the `stack` fixture (tests/integration/conftest.py) reads this. Unfused, so that `read`
# stores its output batches (fused, nobody needs them stored).
STACK_ENV = {"ETL_RETENTION_DAYS": "7", "ETL_FUSION": "0"}


def test_a_failed_run_is_purged_and_can_no_longer_be_resumed(stack: Stack) -> None:
    # id 100 again in the second batch: the table export fails there (on_row_error stop)
    # with its first batch staged; the file export publishes; `read` keeps its batches.
    ids = [*range(1, 701), 100]
    (stack.data / "p.csv").write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in ids))
    plan = {
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "p.csv", "columns": {"id": "int"}}},
            {"name": "to_table", "type": "export", "depends_on": ["read"],
             "config": {"target": "table", "table": "people", "key": "id"}},
            {"name": "to_file", "type": "export", "depends_on": ["read"],
             "config": {"target": "file", "path": "all.jsonl"}},
        ],
        "on_failure": "continue_independent",
    }  # fmt: skip
    stack.start()
    run = stack.wait_run(stack.trigger(stack.create("p", plan))[1]["id"])
    rid = run["id"]
    steps = {s["name"]: s["status"] for s in run["steps"]}
    assert (run["status"], steps["to_table"], steps["to_file"]) == ("failed", "failed", "succeeded")
    assert run["purged_at"] is None
    staged = "SELECT count(*) FROM pg_tables WHERE schemaname = 'etl_stage'"
    batches = "SELECT count(*) FROM step_batches WHERE run_id = %s"
    # what the failed export staged goes soon after the run ends, long before the retention
    wait_until(lambda: stack.sql(staged)[0][0] == 0, timeout=20, what="staging table cleared")
    assert stack.sql(batches, rid)[0][0] == 2
    published = stack.exports / rid / "all.jsonl"
    assert len(published.read_text().splitlines()) == 701

    # Within the retention nothing happens; with 0 days the run is purged.
    out = stack.etl("purge")
    assert out.startswith("purged 0 run(s) finished at least 7 day(s) ago"), out
    out = stack.etl("purge", "--older-than-days", "0")
    assert out.startswith("purged 1 run(s)") and "2 output batch(es), 0 staging table(s)" in out
    assert stack.sql(staged)[0][0] == 0 and stack.sql(batches, rid)[0][0] == 0
    assert len(published.read_text().splitlines()) == 701  # published exports stay
    after = stack.run(rid)
    assert after["purged_at"] is not None
    assert [(s["name"], s["status"], s["records_in"]) for s in after["steps"]] == [
        (s["name"], s["status"], s["records_in"]) for s in run["steps"]
    ]  # history stays
    code, body = stack.req("POST", f"/runs/{rid}/resume")
    assert code == 409 and "purged" in body["error"]["message"], body
    assert "purged 0 run(s)" in stack.etl("purge", "--older-than-days", "0")


def _seed_pipeline(conn, plan: dict) -> str:
    pid = str(uuid.uuid4())
    with conn.cursor() as cur:
        cur.execute("INSERT INTO pipelines (id, name, revision) VALUES (%s, %s, 1)", (pid, pid))
        cur.execute(
            "INSERT INTO revisions (pipeline_id, number, plan, created_by) VALUES (%s, 1, %s, 't')",
            (pid, json.dumps(plan)),
        )
    conn.commit()
    return pid


def _seed_run(conn, pid: str, plan: dict, *, status: str, days_ago: float) -> str:
    rid = str(uuid.uuid4())
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id,"
            " created_by, finished_at) VALUES (%s, %s, 1, %s, %s, 't', 't',"
            " now() - make_interval(secs => %s))",
            (rid, pid, status, rid, days_ago * DAY_S),
        )
        for pos, step in enumerate(plan["steps"]):
            cur.execute(
                "INSERT INTO step_runs (run_id, name, type, position, status)"
                " VALUES (%s, %s, %s, %s, 'failed')",
                (rid, step["name"], step["type"], pos),
            )
        cur.execute(
            "INSERT INTO step_batches (run_id, step_name, seq, records, payload)"
            " VALUES (%s, 'read', 0, 1, '\\x00')",
            (rid,),
        )
        cur.execute(
            "UPDATE step_runs SET checkpoint = %s WHERE run_id = %s AND name = 'read'",
            (json.dumps({"offset": 10, "n": 1, "state": {"groups": [1, 2]}}), rid),
        )
    conn.commit()
    return rid


def test_purge_takes_only_runs_past_the_retention_with_no_open_attempt(
    conn, tmp_path: Path, db_url: str
) -> None:
    plan = {
        "steps": [
            {"name": "read", "type": "ingest", "config": {"source": "file", "path": "p.csv"}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "file", "path": "sub/out.csv", "format": "csv"}},
        ]
    }  # fmt: skip
    pid = _seed_pipeline(conn, plan)
    old = _seed_run(conn, pid, plan, status="failed", days_ago=8)
    recent = _seed_run(conn, pid, plan, status="failed", days_ago=6)
    busy = _seed_run(conn, pid, plan, status="canceled", days_ago=8)
    with conn.cursor() as cur:  # an executor still on a step of the canceled run
        cur.execute(
            "INSERT INTO attempts (run_id, step_name, number) VALUES (%s, 'out', 1)", (busy,)
        )
    conn.commit()
    exports, rejects = tmp_path / "exports", tmp_path / "rejects"
    stages = {}
    for rid in (old, recent, busy):
        export = connectors.export_file(exports, rid, "out", "sub/out.csv")
        export.write_chunk(0, b"id\n1\n")
        reject = connectors.reject_file(rejects, rid, "read")
        reject.write_chunk(0, b"{}\n")
        stages[rid] = (export.stage_dir, reject.stage_dir)

    report = purge_finished_runs(
        conn,
        older_than_s=7 * DAY_S,
        export_dir=exports,
        reject_dir=rejects,
        connect_sandbox=lambda: psycopg2.connect(db_url),
    )
    assert (report.runs, report.batches, report.stages, report.staging_tables) == ([old], 1, 2, 0)
    assert not any(d.exists() for d in stages[old])
    assert all(d.exists() for d in (*stages[recent], *stages[busy]))
    with conn.cursor() as cur:
        cur.execute("SELECT id::text, purged_at IS NOT NULL FROM runs")
        assert dict(cur.fetchall()) == {old: True, recent: False, busy: False}
        cur.execute("SELECT run_id::text FROM step_batches ORDER BY 1")
        assert sorted(r[0] for r in cur.fetchall()) == sorted([recent, busy])
        cur.execute("SELECT run_id::text, checkpoint FROM step_runs WHERE name = 'read'")
        checkpoints = dict(cur.fetchall())
        assert checkpoints[old] == {"offset": 10, "n": 1}  # positions stay, state goes
        assert checkpoints[recent]["state"] == {"groups": [1, 2]}
    conn.rollback()
    # Purging again finds nothing; the open attempt keeps the canceled run until it ends.
    again = purge_finished_runs(
        conn, older_than_s=0, export_dir=exports, reject_dir=rejects,
        connect_sandbox=lambda: psycopg2.connect(db_url),
    )  # fmt: skip
    assert again.runs == [recent]


def test_the_coordinators_sweep_purges_past_the_retention(stack: Stack) -> None:
    plan = {"steps": [{"name": "read", "type": "ingest",
                       "config": {"source": "file", "path": "p.csv"}}]}  # fmt: skip
    conn = psycopg2.connect(stack.db_url)
    try:
        pid = _seed_pipeline(conn, plan)
        old = _seed_run(conn, pid, plan, status="succeeded", days_ago=7.5)
        recent = _seed_run(conn, pid, plan, status="succeeded", days_ago=6.5)
    finally:
        conn.close()
    stack.start(executors=())
    stack.wait_for(lambda: stack.run(old)["purged_at"] is not None, what="the sweep's purge")
    assert stack.run(recent)["purged_at"] is None
    assert stack.sql("SELECT run_id::text FROM step_batches") == [(recent,)]


def test_a_run_that_cannot_be_cleaned_does_not_block_the_others(conn, tmp_path: Path) -> None:
    to_table = {"steps": [
        {"name": "read", "type": "ingest", "config": {"source": "file", "path": "p.csv"}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "table", "table": "people", "key": "id"}},
    ]}  # fmt: skip
    read_only = {"steps": to_table["steps"][:1]}
    stuck = _seed_run(conn, _seed_pipeline(conn, to_table), to_table, status="failed", days_ago=9)
    fine = _seed_run(conn, _seed_pipeline(conn, read_only), read_only, status="failed", days_ago=8)

    def sandbox_down():
        raise psycopg2.OperationalError("could not connect to the sandbox")

    report = purge_finished_runs(
        conn, older_than_s=7 * DAY_S, export_dir=tmp_path, reject_dir=tmp_path,
        connect_sandbox=sandbox_down,
    )  # fmt: skip
    assert (report.runs, report.failed) == ([fine], [stuck])
    with conn.cursor() as cur:
        cur.execute("SELECT id::text, purged_at IS NOT NULL FROM runs")
        assert dict(cur.fetchall()) == {stuck: False, fine: True}
        cur.execute("SELECT run_id::text FROM step_batches")
        assert cur.fetchall() == [(stuck,)]  # the stuck run keeps everything for next time
