"""A table export's rows are visible only once its step commits `succeeded`: an executor
killed between the publish and the step's final commit leaves a publish the next attempt
finds complete, and a step that fails for good after its publish leaves none of its rows.
A staging error is the export step's own: the branches beside it go on. Real coordinator
and executors, every fusion and overlap mode."""

from __future__ import annotations

import itertools

import pytest

from drills import Stack

N = 1800  # 4 batches
MODES = [
    {"ETL_FUSION": fusion, "ETL_OVERLAP": overlap}
    for fusion, overlap in itertools.product("10", "10")
]
MODE_IDS = [f"fusion={m['ETL_FUSION']}-overlap={m['ETL_OVERLAP']}" for m in MODES]


def _plan() -> dict:
    return {
        "steps": [
            {"name": "read", "type": "ingest", "retry": {"max_attempts": 1},
             "config": {"source": "file", "path": "p.csv", "columns": {"id": "int"}}},
            {"name": "to_table", "type": "export", "depends_on": ["read"],
             "retry": {"max_attempts": 1},
             "config": {"target": "table", "table": "published", "key": "id"}},
        ],
    }  # fmt: skip


def _start(stack_factory, env: dict) -> Stack:
    csv = "id,name\n" + "".join(f"{i},Person {i}\n" for i in range(1, N + 1))
    stack = stack_factory(env=env, files={"p.csv": csv})
    stack.start()
    return stack


def _attempts(stack: Stack, run_id: str, step: str) -> list[tuple]:
    return stack.sql(
        "SELECT outcome, batches_done FROM attempts WHERE run_id = %s AND step_name = %s"
        " ORDER BY number",
        run_id,
        step,
    )


def _visible(stack: Stack, run_id: str) -> list[tuple]:
    return stack.sql(
        "SELECT count(*), count(DISTINCT id) FROM sandbox.published WHERE run_id = %s", run_id
    )


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_a_kill_between_publish_and_the_final_commit_is_finished_by_the_next_attempt(
    stack_factory, mode: dict
) -> None:
    stack = _start(stack_factory, {**mode, "ETL_FAULT": "crash_after_publish:step=to_table"})
    run_id = stack.trigger(stack.create("pub", _plan()))[1]["id"]
    run = stack.wait_run(run_id, timeout=120)
    steps = {s["name"]: s for s in run["steps"]}
    assert run["status"] == "succeeded", steps["to_table"]
    assert _visible(stack, run_id) == [(N, N)]
    attempts = _attempts(stack, run_id, "to_table")
    # the executor died once; the next attempt exported nothing again and failed nothing
    assert [a[0] for a in attempts] == ["lease_expired", "succeeded"], attempts
    assert attempts[-1][1] == 0
    assert steps["to_table"]["records_out"] == N
    assert stack.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'etl_stage'") == [(0,)]


FAIL_FINAL_UPDATE = """
CREATE FUNCTION test_refuse_success() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'final status update refused by a test trigger';
END $$;
CREATE TRIGGER test_refuse_success BEFORE UPDATE ON step_runs FOR EACH ROW
WHEN (NEW.name = 'to_table' AND NEW.status = 'succeeded') EXECUTE FUNCTION test_refuse_success();
"""


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_a_step_that_fails_for_good_after_its_publish_leaves_no_row_visible(
    stack_factory, mode: dict
) -> None:
    stack = _start(stack_factory, mode)
    stack.sql(FAIL_FINAL_UPDATE)
    run_id = stack.trigger(stack.create("pub", _plan()))[1]["id"]
    run = stack.wait_run(run_id, timeout=120)
    assert run["status"] == "failed", run
    step = next(s for s in run["steps"] if s["name"] == "to_table")
    assert step["status"] != "succeeded"
    stack.wait_for(
        lambda: stack.sql("SELECT stages_cleared FROM runs WHERE id = %s", run_id)[0][0],
        what="the sweep cleared the run's stages",
        timeout=60,
    )
    assert _visible(stack, run_id) == [(0, 0)]
    assert stack.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'etl_stage'") == [(0,)]


WIDE = 1100  # int columns: a staged row over PostgreSQL's 8160-byte row limit
WIDE_RECORDS = 3


def _wide_plan() -> dict:
    return {
        "on_failure": "continue_independent",
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "wide.csv",
                        "columns": {f"c{i}": "int" for i in range(WIDE)}}},
            {"name": "to_table", "type": "export", "depends_on": ["read"],
             "retry": {"max_attempts": 1},
             "config": {"target": "table", "table": "wide", "key": "c0"}},
            {"name": "to_file", "type": "export", "depends_on": ["read"],
             "config": {"target": "file", "path": "wide.jsonl"}},
        ],
    }  # fmt: skip


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_a_staging_error_fails_its_export_step_and_the_other_branch_goes_on(
    stack_factory, mode: dict
) -> None:
    header = ",".join(f"c{i}" for i in range(WIDE))
    rows = "".join(
        ",".join(str(r * 10_000 + i) for i in range(WIDE)) + "\n" for r in range(WIDE_RECORDS)
    )
    stack = stack_factory(env=mode, files={"wide.csv": f"{header}\n{rows}"})
    stack.start()
    run = stack.wait_run(stack.trigger(stack.create("wide", _wide_plan()))[1]["id"], timeout=120)
    steps = {s["name"]: s for s in run["steps"]}
    assert run["status"] == "failed", run
    assert steps["read"]["status"] == "succeeded", steps["read"]
    assert [a["outcome"] for a in steps["read"]["attempts"]] == ["succeeded"]
    assert steps["to_file"]["status"] == "succeeded", steps["to_file"]
    lines = (stack.exports / run["id"] / "wide.jsonl").read_text().splitlines()
    assert len(lines) == WIDE_RECORDS
    assert steps["to_table"]["status"] == "failed", steps["to_table"]
    assert "row is too big" in steps["to_table"]["attempts"][-1]["error"]
