"""The dag-advancer actor in a real coordinator: a session the server ends (restart,
`pg_terminate_backend`) is an expected loss, logged as one warning, and the run goes on
(the next message, or the sweep, advances it on a new session); never an unhandled error."""

from __future__ import annotations

from collections.abc import Callable

from drills import Stack

PLAN = {
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "people.csv", "columns": {"id": "int"}}},
        {"name": "clean", "type": "transform", "depends_on": ["read"],
         "config": {"op": "trim", "columns": ["name"]}},
        {"name": "to_file", "type": "export", "depends_on": ["clean"],
         "config": {"target": "file", "path": "people.jsonl"}},
    ],
}  # fmt: skip
PEOPLE = "id,name\n" + "".join(f"{i}, p{i} \n" for i in range(1, 1001))


def test_a_lost_advancer_session_is_no_unhandled_error(stack_factory: Callable[..., Stack]) -> None:
    stack = stack_factory(
        env={"ETL_FAULT": "slow_batches:step=clean:ms=1500", "ETL_FUSION": "0"},
        files={"people.csv": PEOPLE},
    )
    stack.start(executors=("executor-1",))
    run_id = stack.trigger(stack.create("lost_sessions", PLAN))[1]["id"]
    advancers = (
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'etl-advancer'"
        " AND datname = current_database()"
    )
    stack.wait_for(lambda: stack.sql(advancers)[0][0] > 0, what="an advancer session")
    stack.wait_for(
        lambda: stack.run(run_id)["steps"][1]["status"] == "running", what="clean running"
    )
    ended = stack.sql(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE application_name = 'etl-advancer'"
        " AND datname = current_database()"
    )[0][0]
    assert ended > 0
    run = stack.wait_run(run_id, timeout=120)
    assert run["status"] == "succeeded", run
    log = stack.logs["coordinator"].read_text(errors="replace")
    assert "unhandled exception" not in log, log[-3000:]
    assert "advancer session lost" in log, log[-3000:]
