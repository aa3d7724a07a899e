"""The failover drill: a 100,000-record import on a primary with a streaming replica, the
primary SIGKILLed mid-import and the replica promoted. Every process reaches the database
through one multi-host URL (`target_session_attrs=read-write`), so it reconnects to the
promoted replica on its own; the run must end with exactly every record once."""

from __future__ import annotations

import time

import psycopg2

from dag import RunStatus
from drills.checks import check_exports, step_of
from drills.harness import now_utc
from drills.report import DrillResult, iso, seconds
from drills.topology import Topology
from drills.workload import generate_csv, import_plan

KILL_AFTER_BATCHES = 20  # of `to_table`: the primary dies well inside the import
PROMOTE_AFTER_S = 1.0  # the time a failover manager takes to decide (Patroni: a few s)
_BATCHES = "SELECT coalesce(sum(batches_done), 0) FROM attempts WHERE run_id = %s"


def run_batches(topo: Topology, run_id: str) -> int | None:
    """Batches every attempt of the run committed so far; None while no primary answers."""
    try:
        return int(topo.sql(_BATCHES, run_id)[0][0])
    except psycopg2.Error:
        return None


def await_first_commit(topo: Topology, run_id: str) -> tuple[int, str]:
    """(batches the new primary holds when it first answers, the moment (ISO) a batch is
    committed past them): the first batch committed on the new primary."""
    base = topo.wait_for(
        lambda: (n := run_batches(topo, run_id)) is not None and (n,),
        timeout=300, what="the promoted replica answers", every=0.05,
    )[0]  # fmt: skip
    topo.wait_for(
        lambda: (run_batches(topo, run_id) or 0) > base,
        timeout=300, what="a batch committed on the new primary", every=0.05,
    )  # fmt: skip
    return base, iso(now_utc()) or ""


def check_nothing_stuck(topo: Topology, res: DrillResult) -> None:
    """No run left queued or running, no open attempt."""
    open_runs = topo.sql("SELECT count(*) FROM runs WHERE status IN ('queued', 'running')")
    open_attempts = topo.sql("SELECT count(*) FROM attempts WHERE outcome IS NULL")
    res.expect("runs left queued or running, open attempts", (open_runs[0][0],
               open_attempts[0][0]), (0, 0))  # fmt: skip


def drill_failover(topo: Topology, res: DrillResult, records: int) -> None:
    """The primary is killed (SIGKILL) while the import runs; the replica is promoted; the
    run ends with exactly `records` rows and lines."""
    pair = topo.cluster
    assert pair is not None and hasattr(pair, "kill_primary")
    n = records
    generate_csv(topo.data / "customers.csv", n)
    run_id = topo.trigger(topo.create("failover", import_plan()))[1]["id"]
    topo.wait_for(
        lambda: _step_batches(topo, run_id) >= KILL_AFTER_BATCHES,
        timeout=600, what=f"to_table: {KILL_AFTER_BATCHES} batches", every=0.02,
    )  # fmt: skip
    on_primary = run_batches(topo, run_id)
    killed_at = pair.kill_primary()
    time.sleep(PROMOTE_AFTER_S)
    promoted_at = pair.promote()
    on_replica, first_commit_at = await_first_commit(topo, run_id)
    run = topo.wait_run(run_id, timeout=900)
    res.add_run("run with its primary killed and the replica promoted mid-import", run)
    res.expect("run", run["status"], RunStatus.SUCCEEDED)
    counts = {(s["records_in"], s["records_out"]) for s in run["steps"]}
    res.expect("records in/out of every step", counts, {(n, n)})
    check_exports(topo, res, run, n, jsonl=True)
    check_nothing_stuck(topo, res)
    res.expect("API health after the failover", topo.call("GET", "/health", auth=False)[0], 200)
    res.figures["failover"] = {
        "batches_seen_on_primary_before_kill": on_primary,
        "batches_on_promoted_replica": on_replica,
        "primary_killed_at": iso(killed_at),
        "replica_promoted_at": iso(promoted_at),
        "first_batch_on_new_primary_at": first_commit_at,
        "kill_to_first_batch_on_new_primary_s": seconds(killed_at, first_commit_at),
        "promoted_to_first_batch_s": seconds(promoted_at, first_commit_at),
        "kill_to_run_finished_s": seconds(killed_at, run["finished_at"]),
        "to_table_attempts": [a["outcome"] for a in step_of(run, "to_table")["attempts"]],
    }


def _step_batches(topo: Topology, run_id: str) -> int:
    query = _BATCHES + " AND step_name = 'to_table'"
    return int(topo.sql(query, run_id)[0][0])
