"""Executors that die or stall in the middle of a step: the step continues from its last
checkpoint elsewhere, nothing is lost or doubled, and a stale executor commits nothing."""

from __future__ import annotations

import json
import signal

from drills import Stack
from tests.integration.actors.nums import PLAN, N

# the `stack` fixture (tests/integration/conftest.py) reads these
STACK_ENV = {"ETL_FAULT": "slow_batches:step=out:ms=250"}
STACK_FILES = {
    "nums.csv": lambda: (
        "id,text\n" + "".join(f'{i},"line {i}\nsecond, line"\n' for i in range(1, N + 1))
    )
}


def _live_attempt(stack: Stack, run_id: str):
    rows = stack.sql(
        "SELECT number, executor, batches_done FROM attempts"
        " WHERE run_id = %s AND step_name = 'out' AND outcome IS NULL AND executor IS NOT NULL",
        run_id,
    )
    return rows[0] if rows else None


def _check_export(stack: Stack, run: dict) -> None:
    lines = (stack.exports / run["id"] / "nums.jsonl").read_text().splitlines()
    ids = [json.loads(x)["id"] for x in lines]
    assert ids == list(range(1, N + 1))  # every record, once, in order
    out = next(s for s in run["steps"] if s["name"] == "out")
    assert out["records_in"] == out["records_out"] == N


def test_sigkill_mid_step_continues_from_checkpoint_on_the_other_executor(stack: Stack) -> None:
    stack.start()
    run_id = stack.trigger(stack.create("nums", PLAN))[1]["id"]
    number, executor, _ = stack.wait_for(
        lambda: (a := _live_attempt(stack, run_id)) and a[2] >= 3 and a, what="3 batches"
    )
    name = executor.split(":")[0]
    stack.kill(name, signal.SIGKILL)
    done_before = stack.sql(
        "SELECT batches_done FROM attempts WHERE run_id = %s AND step_name = 'out'"
        " AND number = %s", run_id, number,
    )[0][0]  # fmt: skip
    run = stack.wait_run(run_id, timeout=120)
    assert run["status"] == "succeeded", run
    out = next(s for s in run["steps"] if s["name"] == "out")
    outcomes = [(a["outcome"], a["executor"].split(":")[0]) for a in out["attempts"]]
    other = "executor-2" if name == "executor-1" else "executor-1"
    assert outcomes == [("lease_expired", name), ("succeeded", other)]
    total = stack.sql(
        "SELECT sum(batches_done) FROM attempts WHERE run_id = %s AND step_name = 'out'", run_id
    )[0][0]
    assert total == N // 500  # no committed batch was processed twice
    assert done_before >= 3
    _check_export(stack, run)


def test_stalled_executor_past_its_lease_commits_nothing_after_waking(stack: Stack) -> None:
    stack.start()
    run_id = stack.trigger(stack.create("nums", PLAN))[1]["id"]
    number, executor, _ = stack.wait_for(
        lambda: (a := _live_attempt(stack, run_id)) and a[2] >= 2 and a, what="2 batches"
    )
    name = executor.split(":")[0]
    stack.kill(name, signal.SIGSTOP)
    # the lease (3 s) runs out, the sweep reaps it, the other executor takes over
    stack.wait_for(
        lambda: (a := _live_attempt(stack, run_id)) and a[0] > number and a[2] >= 1 and a,
        what="takeover", timeout=60,
    )  # fmt: skip
    frozen = stack.sql(
        "SELECT batches_done, outcome FROM attempts WHERE run_id = %s AND step_name = 'out'"
        " AND number = %s", run_id, number,
    )[0]  # fmt: skip
    assert frozen[1] == "lease_expired"
    stack.kill(name, signal.SIGCONT)
    run = stack.wait_run(run_id, timeout=120)
    assert run["status"] == "succeeded", run
    after = stack.sql(
        "SELECT batches_done FROM attempts WHERE run_id = %s AND step_name = 'out'"
        " AND number = %s", run_id, number,
    )[0][0]  # fmt: skip
    assert after == frozen[0]  # the woken executor committed nothing
    stack.wait_for(lambda: "lease" in stack.logs[name].read_text(), what="stale executor log")
    assert "lease" in stack.logs[name].read_text()
    _check_export(stack, run)


def test_sigterm_hands_the_step_to_the_other_executor_at_once(stack: Stack) -> None:
    stack.env["ETL_LEASE_TTL_S"] = "30"  # a takeover must not wait for the lease to lapse
    stack.start()
    run_id = stack.trigger(stack.create("nums", PLAN))[1]["id"]
    _, executor, _ = stack.wait_for(
        lambda: (a := _live_attempt(stack, run_id)) and a[2] >= 2 and a, what="2 batches"
    )
    name = executor.split(":")[0]
    stack.kill(name, signal.SIGTERM)  # waits for the process to exit
    assert stack.procs[name].returncode == 0
    run = stack.wait_run(run_id, timeout=25)  # well inside the 30 s lease
    assert run["status"] == "succeeded", run
    out = next(s for s in run["steps"] if s["name"] == "out")
    assert [a["outcome"] for a in out["attempts"]] == ["released", "succeeded"]
    total = stack.sql(
        "SELECT sum(batches_done) FROM attempts WHERE run_id = %s AND step_name = 'out'", run_id
    )[0][0]
    assert total == N // 500
    _check_export(stack, run)


def test_a_stale_executor_waking_after_the_publish_leaves_nothing(stack: Stack) -> None:
    # Regression: woken after the step that took over had published, the stale executor
    # wrote the chunk of its batch in flight into the published run directory.
    stack.start()
    run_id = stack.trigger(stack.create("nums", PLAN))[1]["id"]
    number, executor, _ = stack.wait_for(
        lambda: (a := _live_attempt(stack, run_id)) and a[2] >= 2 and a, what="2 batches"
    )
    name = executor.split(":")[0]
    stack.kill(name, signal.SIGSTOP)
    run = stack.wait_run(run_id, timeout=120)  # taken over, finished and published
    stack.kill(name, signal.SIGCONT)
    stack.wait_for(lambda: _stale_gave_up(stack, name), what="the stale attempt gave up")
    _check_export(stack, run)
    run_dir = stack.exports / run["id"]
    assert [str(p.relative_to(run_dir)) for p in run_dir.rglob("*")] == ["nums.jsonl"]
    staged = [p for p in stack.exports.rglob("*") if p.suffix in (".chunks", ".tmp")]
    assert staged == []
    after = stack.sql(
        "SELECT outcome FROM attempts WHERE run_id = %s AND step_name = 'out' AND number = %s",
        run_id, number,
    )[0][0]  # fmt: skip
    assert after == "lease_expired"


def _stale_gave_up(stack: Stack, name: str) -> bool:
    """The woken executor's step (not only its heartbeat) found its lease gone."""
    lines = stack.logs[name].read_text().splitlines()
    return any('"etl.executor"' in line and "lease" in line for line in lines)
