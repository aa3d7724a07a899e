"""A step is taken over only by an executor that sees the directories its chunks are staged
in. Executor A (its own temp root) stages a file export and is SIGKILLed; executor B, whose
export and reject directories are another temp root (another host's local disk), gets the
takeover's wake-up and leaves the attempt, the reason in its error; once B is gone, C, on
A's directories, takes it over and publishes every record once."""

from __future__ import annotations

import json
from pathlib import Path

from drills import Stack

N = 6000
PLAN = {
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "nums.csv", "columns": {"id": "int"}}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "nums.jsonl"}},
    ]
}  # fmt: skip


def _attempts(stack: Stack, run_id: str) -> list[dict]:
    return next(s for s in stack.run(run_id)["steps"] if s["name"] == "out")["attempts"]


def test_a_step_is_not_taken_over_where_its_chunks_are_not_seen(
    stack_factory, tmp_path: Path
) -> None:
    # unfused: `out` runs as an attempt of its own, not inside the ingest's
    env = {"ETL_FAULT": "slow_batches:step=out:ms=300", "ETL_FUSION": "0"}
    stack: Stack = stack_factory(env=env)
    (stack.data / "nums.csv").write_text("id\n" + "".join(f"{i}\n" for i in range(1, N + 1)))
    stack.start(executors=("executor-a",))
    run_id = stack.trigger(stack.create("nums", PLAN))[1]["id"]
    stack.wait_for(
        lambda: (a := _attempts(stack, run_id)) and a[0]["executor"] and a[0]["started_at"],
        what="out claimed",
    )
    stack.wait_for(
        lambda: (
            stack.sql(
                "SELECT batches_done FROM attempts WHERE run_id = %s AND step_name = 'out'", run_id
            )[0][0]
            >= 2
        ),
        what="2 batches of out",
    )
    stack.kill("executor-a")
    elsewhere = tmp_path / "other-host"
    other_dirs = {"ETL_EXPORT_DIR": str(elsewhere / "exports"),
                  "ETL_REJECT_DIR": str(elsewhere / "rejects")}  # fmt: skip
    # B may start once A's beat is stale (it would refuse to start beside a live A)
    stack.wait_for(lambda: _started(stack, "executor-b", other_dirs), timeout=60, what="B up")
    waiting = stack.wait_for(
        lambda: len(a := _attempts(stack, run_id)) == 2 and "waiting for an executor" in
        (a[1]["error"] or "") and a[1],
        timeout=60, what="the takeover left by B, with its reason",
    )  # fmt: skip
    assert waiting["executor"] is None and waiting["outcome"] is None, waiting
    assert "executor-b" in waiting["error"], waiting
    assert not list(elsewhere.rglob("*.chunk"))  # B staged nothing
    stack.kill("executor-b", sig=15)
    stack.spawn("executor-c", "executor", "--name", "executor-c")
    run = stack.wait_run(run_id, timeout=120)
    assert run["status"] == "succeeded", run
    attempts = _attempts(stack, run_id)
    assert [a["outcome"] for a in attempts] == ["lease_expired", "succeeded"], attempts
    assert attempts[1]["executor"].startswith("executor-c:") and attempts[1]["error"] is None
    lines = (stack.exports / run_id / "nums.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["id"] for x in lines) == list(range(1, N + 1))


def _started(stack: Stack, name: str, env: dict[str, str]) -> bool:
    """Start executor `name` with `env`; False (to try again) if it refused to start."""
    proc = stack.procs.get(name)
    if proc is not None and proc.poll() is None:
        return bool(
            stack.sql("SELECT 1 FROM executors WHERE name = %s AND stopped_at IS NULL", name)
        )
    stack.spawn(name, "executor", "--name", name, env=env)
    return False
