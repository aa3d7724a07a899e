"""An aggregate over many groups on real processes: its state is checkpointed a batch's
groups at a time (`dag.transforms`, stored as the step's batches -1, -2, ...), and an
executor SIGKILLed in the middle of it hands over to an attempt that restores that state
from its checkpoint and finishes exact, fused or not."""

from __future__ import annotations

import json

import pytest

from drills import Stack

N, GROUPS = 30_000, 12_000  # 60 batches; every group in three of them, far apart
CRASH = "crash_after_export:step=agg:batch=40"
PLAN = {
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "g.csv", "columns": {"g": "int", "v": "int"}}},
        {"name": "agg", "type": "transform", "depends_on": ["read"],
         "config": {"op": "aggregate", "column": "v", "group_by": ["g"]}},
        {"name": "out", "type": "export", "depends_on": ["agg"],
         "config": {"target": "file", "path": "groups.jsonl"}},
    ]
}  # fmt: skip
STACK_FILES = {
    "g.csv": lambda: "g,v\n" + "".join(f"{i % GROUPS},{i % 997 - 400}\n" for i in range(N))
}


def _expected() -> dict[int, dict]:
    groups: dict[int, list[int]] = {}
    for i in range(N):
        groups.setdefault(i % GROUPS, []).append(i % 997 - 400)
    return {
        g: {"g": g, "count": len(v), "sum": sum(v), "min": min(v), "max": max(v)}
        for g, v in groups.items()
    }


@pytest.mark.parametrize(
    "stack", [{"ETL_FAULT": CRASH}, {"ETL_FAULT": CRASH, "ETL_FUSION": "0"}], indirect=True
)
def test_an_aggregate_of_many_groups_resumes_from_its_checkpoint_exact(stack: Stack) -> None:
    stack.start()
    run = stack.wait_run(stack.trigger(stack.create("groups", PLAN))[1]["id"], timeout=240)
    assert run["status"] == "succeeded", run
    agg = next(s for s in run["steps"] if s["name"] == "agg")
    assert [a["outcome"] for a in agg["attempts"]] == ["lease_expired", "succeeded"]
    done = stack.sql(
        "SELECT batches_done FROM attempts WHERE run_id = %s AND step_name = 'agg'"
        " ORDER BY number", run["id"],
    )  # fmt: skip
    # the second attempt went on from batch 40 (39 committed before the kill)
    assert [d for (d,) in done] == [39, 21]
    lines = (stack.exports / run["id"] / "groups.jsonl").read_text().splitlines()
    got = [json.loads(line) for line in lines]
    assert [r["g"] for r in got] == list(range(GROUPS))  # first-seen order
    assert {r["g"]: r for r in got} == _expected()
    # what the state's parts hold stays within twice the groups
    entries = stack.sql(
        "SELECT (checkpoint->'state'->>'entries')::int FROM step_runs"
        " WHERE run_id = %s AND name = 'agg'", run["id"],
    )[0][0]  # fmt: skip
    assert GROUPS <= entries <= 2 * GROUPS
