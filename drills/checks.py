"""What the drills check on a run, shared by every drill: its steps, attempts, committed
batches and exports."""

from __future__ import annotations

import json

from dag import (
    AttemptOutcome,
    RunStatus,
)
from drills.report import DrillResult
from drills.topology import Topology

SUCCEEDED, LEASE_EXPIRED = AttemptOutcome.SUCCEEDED, AttemptOutcome.LEASE_EXPIRED
SKIPPED = RunStatus.SKIPPED


def step_of(run: dict, name: str) -> dict:
    return next(s for s in run["steps"] if s["name"] == name)


def outcomes(step: dict) -> list[str | None]:
    return [a["outcome"] for a in step["attempts"]]


def batches_done(topo: Topology, run_id: str, step: str) -> list[int]:
    query = "SELECT batches_done FROM attempts WHERE run_id = %s AND step_name = %s ORDER BY number"
    return [r[0] for r in topo.sql(query, run_id, step)]


def await_batches(topo: Topology, run_id: str, step: str, n: int) -> tuple:
    """Wait until the step's claimed, unfinished attempt committed `n` batches; returns
    (number, executor, batches_done)."""
    query = (
        "SELECT number, executor, batches_done FROM attempts WHERE run_id = %s AND step_name = %s"
        " AND outcome IS NULL AND executor IS NOT NULL AND batches_done >= %s"
    )
    found = lambda: (rows := topo.sql(query, run_id, step, n)) and rows[0]  # noqa: E731
    return topo.wait_for(found, timeout=900, what=f"{step}: {n} batches", every=0.02)


def check_exports(topo: Topology, res: DrillResult, run: dict, n: int, jsonl: bool) -> None:
    """Exactly n rows, ids 1..n, in sandbox.customers for the run (and in the JSONL file)."""
    query = "SELECT count(*), count(DISTINCT record_key), count(DISTINCT id), min(id), max(id)"
    rows = topo.sql(query + " FROM sandbox.customers WHERE run_id = %s", run["id"])[0]
    res.expect("sandbox rows, distinct keys, distinct ids, min id, max id", rows, (n, n, n, 1, n))
    staged = topo.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'etl_stage'")[0][0]
    res.expect("staging tables left behind", staged, 0)
    if jsonl:
        path = topo.exports / run["id"] / "customers.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        ids = {json.loads(line)["id"] for line in lines}
        res.expect("JSONL export: lines, distinct ids", (len(lines), len(ids)), (n, n))
