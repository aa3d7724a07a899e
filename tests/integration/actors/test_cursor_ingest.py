"""Incremental table ingest (`"cursor": COLUMN`) through the whole engine: each run reads
the rows above the mark of the last succeeded run and up to the bound fixed when its step
started; rows written meanwhile, and rows committed late below the mark, go to the next run;
an executor killed mid-step resumes the same range."""

from __future__ import annotations

import json
import signal

import psycopg2

from drills import Stack

# the `stack` fixture (tests/integration/conftest.py) reads this
STACK_ENV = {"ETL_FAULT": "slow_batches:step=read:ms=150"}

PLAN = {
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "table", "table": "src", "cursor": "ts"}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "src.jsonl"}},
    ]
}  # fmt: skip


def _insert(stack: Stack, ids: range, seconds: int | None = None) -> None:
    """Rows `ids`, each at 2024-01-01 plus `id` seconds (or plus `seconds` for all)."""
    offset = "g" if seconds is None else str(seconds)
    stack.sql(
        "INSERT INTO sandbox.src SELECT g, timestamptz '2024-01-01 00:00:00+00'"
        f" + make_interval(secs => {offset}), g * 2 FROM generate_series(%s, %s) g",
        ids.start, ids.stop - 1,
    )  # fmt: skip


def _read_ids(stack: Stack, run_id: str) -> list[int]:
    lines = (stack.exports / run_id / "src.jsonl").read_text().splitlines()
    return [json.loads(x)["id"] for x in lines]


def _run(stack: Stack, pid: str, key: str) -> dict:
    run = stack.wait_run(stack.trigger(pid, key)[1]["id"], timeout=120)
    return run


def _range(stack: Stack, run_id: str) -> tuple:
    return stack.sql(
        "SELECT lower_value, upper_value, late_rows FROM step_cursor_ranges WHERE run_id = %s",
        run_id,
    )[0]


def test_runs_read_new_rows_only_and_a_killed_step_resumes_the_same_range(stack: Stack) -> None:
    stack.sql("CREATE TABLE sandbox.src (id bigint PRIMARY KEY, ts timestamptz, v int)")
    _insert(stack, range(1, 3001))
    stack.start()
    pid = stack.create("src", PLAN)
    run_id = stack.trigger(pid, "r1")[1]["id"]
    live = stack.wait_for(
        lambda: stack.sql(
            "SELECT executor FROM attempts WHERE run_id = %s AND step_name = 'read'"
            " AND outcome IS NULL AND batches_done >= 2",
            run_id,
        ),
        what="2 ingested batches",
    )
    # written while the run runs: above its bound, and one late row below it (id 5000)
    _insert(stack, range(3001, 3101))
    _insert(stack, range(5000, 5001), seconds=10)
    stack.kill(live[0][0].split(":")[0], signal.SIGKILL)
    run = stack.wait_run(run_id, timeout=120)
    assert run["status"] == "succeeded", run
    read = run["steps"][0]
    assert [a["outcome"] for a in read["attempts"]] == ["lease_expired", "succeeded"]
    assert _read_ids(stack, run_id) == list(range(1, 3001))  # the range fixed at its start
    assert _range(stack, run_id) == (None, "2024-01-01 00:50:00+00", 0)

    second = _run(stack, pid, "r2")
    assert second["status"] == "succeeded", second
    assert _read_ids(stack, second["id"]) == [*range(3001, 3101), 5000]
    assert second["steps"][0]["cursor_range"] == {
        "table": "src", "column": "ts", "after": "2024-01-01 00:50:00+00",
        "upto": "2024-01-01 00:51:40+00", "late_rows": 1,
    }  # fmt: skip
    assert second["steps"][1]["cursor_range"] is None
    assert _range(stack, second["id"]) == (
        "2024-01-01 00:50:00+00", "2024-01-01 00:51:40+00", 1
    )  # fmt: skip
    third = _run(stack, pid, "r3")
    assert third["status"] == "succeeded" and _read_ids(stack, third["id"]) == []

    # a canceled run leaves the mark: the next one reads what it would have read
    _insert(stack, range(6001, 8001))
    canceled = stack.trigger(pid, "r4")[1]["id"]
    stack.wait_for(
        lambda: stack.sql(
            "SELECT 1 FROM attempts WHERE run_id = %s AND batches_done >= 1", canceled
        ),
        what="a batch of the run to cancel",
    )
    assert stack.req("POST", f"/runs/{canceled}/cancel")[0] == 202
    assert stack.wait_run(canceled)["status"] == "canceled"
    fifth = _run(stack, pid, "r5")
    assert _read_ids(stack, fifth["id"]) == list(range(6001, 8001))
    assert _range(stack, fifth["id"])[0] == "2024-01-01 00:51:40+00"


def test_a_row_committed_late_below_the_mark_is_read_by_the_next_run(stack: Stack) -> None:
    stack.sql("CREATE TABLE sandbox.src (id bigint PRIMARY KEY, ts timestamptz, v int)")
    _insert(stack, range(1, 11))
    stack.start()
    pid = stack.create("src", PLAN)
    # a writer takes its cursor value, then commits after rows with higher values did
    # and after the first run's bound
    writer = psycopg2.connect(stack.db_url)
    try:
        with writer.cursor() as cur:
            cur.execute(
                "INSERT INTO sandbox.src VALUES (100, timestamptz '2024-01-01 00:00:05.5+00', 0)"
            )
        _insert(stack, range(11, 21))
        first = _run(stack, pid, "r1")
        assert _read_ids(stack, first["id"]) == list(range(1, 21))
        writer.commit()
    finally:
        writer.close()
    second = _run(stack, pid, "r2")
    assert second["status"] == "succeeded", second
    assert _read_ids(stack, second["id"]) == [100]  # below the mark, not skipped
    assert _range(stack, second["id"])[2] == 1
    third = _run(stack, pid, "r3")
    assert _read_ids(stack, third["id"]) == []  # and read once


def _marks(stack: Stack, pid: str) -> list[tuple]:
    status, body = stack.req("GET", f"/pipelines/{pid}/cursors")
    assert status == 200, body
    return [(c["step"], c["table"], c["column"], c["value"]) for c in body["cursors"]]


def test_a_failed_run_leaves_the_mark_and_an_admin_resets_or_sets_it(stack: Stack) -> None:
    stack.sql("CREATE TABLE sandbox.src (id bigint PRIMARY KEY, ts timestamptz, v int)")
    _insert(stack, range(1, 101))
    stack.start()
    checked = json.loads(json.dumps(PLAN))
    checked["steps"][0]["checks"] = [{"check": "not_null", "columns": ["v"]}]
    pid = stack.create("src", checked)
    assert _marks(stack, pid) == [("read", "src", "ts", None)]
    assert _read_ids(stack, _run(stack, pid, "r1")["id"]) == list(range(1, 101))
    mark = ("read", "src", "ts", "2024-01-01 00:01:40+00")
    assert _marks(stack, pid) == [mark]

    _insert(stack, range(101, 151))
    stack.sql("UPDATE sandbox.src SET v = NULL WHERE id = 120")
    failed = _run(stack, pid, "r2")
    assert failed["status"] == "failed", failed
    assert _marks(stack, pid) == [mark]  # a failed run leaves the mark
    stack.sql("UPDATE sandbox.src SET v = 240 WHERE id = 120")
    again = _run(stack, pid, "r3")
    assert again["status"] == "succeeded", again
    assert _read_ids(stack, again["id"]) == list(range(101, 151))  # the range, read again

    assert "reset every mark" in stack.etl("cursors", "reset", "src", "--all")
    assert _marks(stack, pid) == [("read", "src", "ts", None)]
    assert _read_ids(stack, _run(stack, pid, "r4")["id"]) == list(range(1, 151))

    said = stack.etl("cursors", "set", "src", "read", "2024-01-01 00:02:20+00")
    assert "set the mark of src/read to 2024-01-01 00:02:20+00" in said
    status, body = stack.req("GET", f"/pipelines/{pid}/cursors")
    assert body["cursors"][0]["run_id"] is None and body["cursors"][0]["updated_by"]
    assert _read_ids(stack, _run(stack, pid, "r5")["id"]) == list(range(141, 151))
    listed = stack.etl("cursors", "list", "src")
    assert "src.ts" in listed and "2024-01-01 00:02:30+00" in listed
    audit = stack.sql(
        "SELECT action, details->>'step' FROM audit WHERE left(action, 7) = 'cursor.' ORDER BY id"
    )
    assert audit == [("cursor.reset", "read"), ("cursor.set", "read")]  # before the checks
    assert stack.req("PUT", f"/pipelines/{pid}/cursors/out", {"value": "1"})[0] == 404
    assert stack.req("PUT", f"/pipelines/{pid}/cursors/read", {"value": None})[0] == 400
    status, body = stack.req("PUT", f"/pipelines/{pid}/cursors/read", {"value": 7})
    assert status == 200 and body["value"] == "7" and body["updated_by"], body
    assert stack.req("DELETE", f"/pipelines/{pid}/cursors/read")[0] == 204
    assert _marks(stack, pid) == [("read", "src", "ts", None)]


def test_a_cursor_column_that_cannot_be_one_fails_the_run_naming_the_field(stack: Stack) -> None:
    stack.sql("CREATE TABLE sandbox.src (id bigint PRIMARY KEY, ts timestamptz, doc jsonb)")
    stack.start()
    errors = []
    for column in ("doc", "nope"):
        plan = json.loads(json.dumps(PLAN))
        plan["steps"][0]["config"]["cursor"] = column
        run = _run(stack, stack.create(f"src-{column}", plan), "r1")
        assert run["status"] == "failed"
        assert [a["outcome"] for a in run["steps"][0]["attempts"]] == ["input_error"]
        errors.append(run["steps"][0]["error"])
    assert "config.cursor: column 'doc' is jsonb" in errors[0]
    assert "config.cursor: the table has no column 'nope'" in errors[1]
