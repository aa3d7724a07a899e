"""A merge export killed between its publish and its step's final commit: the next attempt
finds the publish done by its undo table and applies nothing again, so every key holds the
run's values once, written by it; the undo table goes once the run is cleared. Real
coordinator and executors."""

from __future__ import annotations

from drills import Stack

N = 1800  # 4 batches


def _plan(path: str) -> dict:
    return {
        "params": {"tag": {"type": "string"}},
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": path, "columns": {"id": "int"}}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "table", "table": "people", "key": "id", "mode": "merge"}},
        ],
    }  # fmt: skip


STACK_ENV = {"ETL_FAULT": "crash_after_publish:step=out:attempt=1"}
STACK_FILES = {
    "a.csv": "id,name\n" + "".join(f"{i},A {i}\n" for i in range(1, N + 1)),
    "b.csv": "id,name\n" + "".join(f"{i},B {i}\n" for i in range(N // 2, N + N // 2)),
}


def test_a_kill_after_a_merge_publish_applies_it_once(stack: Stack) -> None:
    stack.start()
    pid = stack.create("people", _plan("{tag}.csv"))
    runs = []
    for tag in ("a", "b"):
        status, run = stack.req("POST", f"/pipelines/{pid}/runs", {"params": {"tag": tag}})
        assert status == 201, run
        run = stack.wait_run(run["id"], timeout=120)
        assert run["status"] == "succeeded", run
        attempts = stack.sql(
            "SELECT outcome, batches_done FROM attempts WHERE run_id = %s AND step_name = 'out'"
            " ORDER BY number",
            run["id"],
        )
        assert [a[0] for a in attempts] == ["lease_expired", "succeeded"]
        assert attempts[-1][1] == 0  # nothing staged again
        runs.append(run["id"])
        (killed,) = stack.sql(
            "SELECT executor FROM attempts WHERE run_id = %s AND step_name = 'out' AND number = 1",
            run["id"],
        )[0]
        name = killed.split(":")[0]
        stack.spawn(name, "executor", "--name", name)  # the fault killed it
    rows = stack.sql("SELECT id, name, run_id::text, step_id FROM sandbox.people ORDER BY id")
    expected = [(i, f"A {i}", runs[0], "out") for i in range(1, N // 2)]
    expected += [(i, f"B {i}", runs[1], "out") for i in range(N // 2, N + N // 2)]
    assert rows == expected
    stack.wait_for(
        lambda: stack.sql("SELECT bool_and(stages_cleared) FROM runs")[0][0],
        what="the sweep cleared the runs",
    )
    assert stack.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'etl_stage'") == [(0,)]
