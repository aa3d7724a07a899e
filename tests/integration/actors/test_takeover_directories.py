"""A step is taken over only by an executor that sees the directories its chunks are staged
in. Executor A (its own temp root) stages a file export and is SIGKILLed; executor B, whose
export and reject directories are another temp root (another host's local disk), gets the
takeover's wake-up and leaves the attempt, the reason in its error; once B is gone, C, on
A's directories, takes it over and publishes every record once."""

from __future__ import annotations

import json
import time
from pathlib import Path

from drills import Stack
from tests.integration.actors.nums import PLAN, N, write_nums


def _waiting(stack: Stack, run_id: str) -> tuple | None:
    """(step, executor, error) of the run's open attempt left waiting for the directories."""
    rows = stack.sql(
        "SELECT step_name, executor, error FROM attempts WHERE run_id = %s AND outcome IS NULL"
        " AND error LIKE 'waiting for an executor%%'",
        run_id,
    )
    return rows[0] if rows else None


def _out_batches(stack: Stack, run_id: str) -> int:
    query = "SELECT coalesce(sum(batches_done), 0) FROM attempts WHERE run_id = %s"
    return stack.sql(query + " AND step_name = 'out'", run_id)[0][0]


def test_a_step_is_not_taken_over_where_its_chunks_are_not_seen(
    stack_factory, tmp_path: Path
) -> None:
    # fused (the default): `out` runs inside the ingest's attempt, adopted by its executor
    stack: Stack = stack_factory(env={"ETL_FAULT": "slow_batches:step=out:ms=300"})
    write_nums(stack)
    stack.start(executors=("executor-a",))
    run_id = stack.trigger(stack.create("nums", PLAN))[1]["id"]
    stack.wait_for(lambda: _out_batches(stack, run_id) >= 2, what="2 batches of out")
    stack.kill("executor-a")
    elsewhere = tmp_path / "other-host"
    other_dirs = {"ETL_EXPORT_DIR": str(elsewhere / "exports"),
                  "ETL_REJECT_DIR": str(elsewhere / "rejects")}  # fmt: skip
    # B may start once A's beat is stale (it would refuse to start beside a live A)
    stack.wait_for(lambda: _started(stack, "executor-b", other_dirs), timeout=60, what="B up")
    _, executor, error = stack.wait_for(
        lambda: _waiting(stack, run_id), timeout=60, what="the takeover left by B, its reason"
    )
    assert executor is None and "executor-b" in error and "executor-a" in error, error
    shown = [a for s in stack.run(run_id)["steps"] for a in s["attempts"] if a["error"] == error]
    assert len(shown) == 1 and shown[0]["outcome"] is None  # the API shows why it waits
    assert not list(elsewhere.rglob("*.chunks"))  # B staged nothing
    time.sleep(11)  # the sweep re-sends an unclaimed wake-up every 5 s: B says why once
    assert stack.logs["executor-b"].read_text(errors="replace").count(" not claimed: ") == 1
    stack.kill("executor-b", sig=15)
    stack.spawn("executor-c", "executor", "--name", "executor-c")
    run = stack.wait_run(run_id, timeout=120)
    assert run["status"] == "succeeded", run
    out = next(s for s in run["steps"] if s["name"] == "out")
    assert out["attempts"][-1]["executor"].startswith("executor-c:"), out["attempts"]
    assert not _waiting(stack, run_id)
    lines = (stack.exports / run_id / "nums.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["id"] for x in lines) == list(range(1, N + 1))
    marks = stack.sql("SELECT DISTINCT export_mark FROM attempts WHERE run_id = %s", run_id)
    assert len(marks) == 1 and marks[0][0]  # every attempt, fused ones too, on one directory


def _started(stack: Stack, name: str, env: dict[str, str]) -> bool:
    """Start executor `name` with `env`; False (to try again) if it refused to start."""
    proc = stack.procs.get(name)
    if proc is not None and proc.poll() is None:
        return bool(
            stack.sql("SELECT 1 FROM executors WHERE name = %s AND stopped_at IS NULL", name)
        )
    stack.spawn(name, "executor", "--name", name, env=env)
    return False
