"""An export step succeeds only with its output complete: a staging table dropped or staged
chunks deleted under a running export make the attempt fail loudly and the step start
over, and the run ends with exactly its records (real coordinator and executors)."""

from __future__ import annotations

import pytest

from drills import Stack, wait_until

N = 50_000  # 100 batches
LOST_AT = 21  # batches committed when the stage is damaged


def _plan(target: dict) -> dict:
    return {
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "p.csv", "columns": {"id": "int"}}},
            {"name": "out", "type": "export", "depends_on": ["read"], "config": target},
        ],
    }  # fmt: skip


TABLE = {"target": "table", "table": "staged_people", "key": "id"}
FILE = {"target": "file", "path": "p.jsonl"}


def _run_with_damage(stack: Stack, target: dict, damage) -> tuple[dict, dict]:
    (stack.data / "p.csv").write_text(
        "id,name\n" + "".join(f"{i},Person {i}\n" for i in range(1, N + 1))
    )
    stack.start()
    run_id = stack.trigger(stack.create("staged", _plan(target)))[1]["id"]

    def committed() -> bool:
        rows = stack.sql(
            "SELECT (checkpoint->>'chunks')::int FROM step_runs WHERE run_id = %s AND name = 'out'",
            run_id,
        )
        return bool(rows) and (rows[0][0] or 0) >= LOST_AT

    wait_until(committed, timeout=60, what=f"{LOST_AT} batches of the export committed")
    damage(run_id)
    run = stack.wait_run(run_id, timeout=120)
    return run, {s["name"]: s for s in run["steps"]}


@pytest.mark.parametrize("fusion", ["1", "0"])
def test_a_dropped_staging_table_makes_the_export_start_over_not_publish_a_part(
    stack_factory, fusion: str
) -> None:
    env = {"ETL_FAULT": "slow_batches:step=out:ms=60", "ETL_FUSION": fusion}
    stack = stack_factory(env=env)

    def drop_staging(_run_id: str) -> None:
        (name,) = stack.sql("SELECT tablename FROM pg_tables WHERE schemaname = 'etl_stage'")[0]
        stack.sql(f'DROP TABLE etl_stage."{name}"')

    try:
        run, steps = _run_with_damage(stack, TABLE, drop_staging)
        rows = stack.sql(
            "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM sandbox.staged_people"
            " WHERE run_id = %s",
            run["id"],
        )
    finally:
        stack.stop()
    assert run["status"] == "succeeded", steps["out"]
    assert rows == [(N, N, 1, N)]
    outcomes = [a["outcome"] for a in steps["out"]["attempts"]]
    assert outcomes == ["failed", "succeeded"], steps["out"]["attempts"]
    assert "StagingLost" in steps["out"]["attempts"][0]["error"]
    assert steps["out"]["records_out"] == N
    assert stack.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'etl_stage'") == [(0,)]


def test_deleted_staged_chunks_make_the_file_export_start_over(stack_factory) -> None:
    stack = stack_factory(env={"ETL_FAULT": "slow_batches:step=out:ms=60"})

    def delete_chunks(run_id: str) -> None:
        stage = stack.exports / ".stage" / run_id / "out"
        for log in stage.glob("*.chunks"):  # the attempt's log: every chunk staged so far
            log.unlink()

    try:
        run, steps = _run_with_damage(stack, FILE, delete_chunks)
    finally:
        stack.stop()
    assert run["status"] == "succeeded", steps["out"]
    lines = (stack.exports / run["id"] / "p.jsonl").read_text().splitlines()
    assert len(lines) == N
    assert len(set(lines)) == N
    outcomes = [a["outcome"] for a in steps["out"]["attempts"]]
    assert outcomes == ["failed", "succeeded"], steps["out"]["attempts"]
    assert "ChunkMissing" in steps["out"]["attempts"][0]["error"]


def test_a_finished_run_leaves_no_chunk_and_no_staging_table_behind(stack_factory) -> None:
    """Both exports fail for good after staging batches (a key repeated in the third batch
    of the table's, chunks deleted under the file's): once the run ends, the sweep removes
    what they staged."""
    stack = stack_factory(env={"ETL_FAULT": "slow_batches:step=out:ms=60"})
    plan = _plan({**FILE})
    plan["on_failure"] = "continue_independent"
    plan["steps"][1]["retry"] = {"max_attempts": 1}
    plan["steps"].append(
        {"name": "table", "type": "export", "depends_on": ["read"],
         "retry": {"max_attempts": 1}, "config": {**TABLE, "table": "left_people"}}
    )  # fmt: skip
    rows = [f"{i},Person {i}\n" for i in range(1, N + 1)]
    rows[1200] = "5,Person 5 again\n"  # batch 3 of `table`: a key staged by batch 1
    (stack.data / "p.csv").write_text("id,name\n" + "".join(rows))
    try:
        stack.start()
        run_id = stack.trigger(stack.create("leftovers", plan))[1]["id"]

        def committed() -> bool:
            query = "SELECT (checkpoint->>'chunks')::int FROM step_runs WHERE run_id = %s"
            got = stack.sql(query + " AND name = 'out'", run_id)
            return bool(got) and (got[0][0] or 0) >= LOST_AT

        wait_until(committed, timeout=60, what="the file export staged its chunks")
        for log in (stack.exports / ".stage" / run_id / "out").glob("*.chunks"):
            log.unlink()
        run = stack.wait_run(run_id, timeout=120)
        stage = stack.exports / ".stage" / run_id

        def cleared() -> bool:
            tables = stack.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'etl_stage'")
            marked = stack.sql("SELECT stages_cleared FROM runs WHERE id = %s", run_id)
            return tables == [(0,)] and not any(stage.rglob("*.chunks")) and marked[0][0]

        wait_until(cleared, timeout=30, what="the sweep removed what the failed exports staged")
        marked = stack.sql("SELECT stages_cleared FROM runs WHERE id = %s", run_id)
    finally:
        stack.stop()
    steps = {s["name"]: s for s in run["steps"]}
    assert run["status"] == "failed"
    assert steps["out"]["status"] == steps["table"]["status"] == "failed"
    assert "ChunkMissing" in steps["out"]["error"] and "5" in steps["table"]["error"]
    assert steps["table"]["checkpoint"] is not None  # it had staged batches before failing
    assert marked == [(True,)]
    assert not (stack.exports / run_id / "p.jsonl").exists()
