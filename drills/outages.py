"""The outage drills: PostgreSQL restarted under running exports, an executor frozen past
its lease (SIGSTOP), every connection cut."""

from __future__ import annotations

import json
import os
import signal
import time

import psycopg2

from dag import (
    AttemptOutcome,
    RunStatus,
)
from drills.checks import (
    LEASE_EXPIRED,
    await_batches,
    check_exports,
    outcomes,
    step_of,
)
from drills.harness import now_utc
from drills.report import DrillResult, iso, seconds
from drills.topology import Topology
from drills.workload import generate_csv, import_plan

RESTART_RECORDS = 20_000  # 40 batches


def _committed_batches(topo: Topology, run_id: str, step: str) -> int | None:
    """Batches the step's attempts committed so far; None while the database is away."""
    query = "SELECT coalesce(sum(batches_done), 0) FROM attempts"
    query += " WHERE run_id = %s AND step_name = %s"
    try:
        return int(topo.sql(query, run_id, step)[0][0])
    except psycopg2.Error:
        return None


def _await_resumed(topo: Topology, run_id: str, step: str) -> str:
    """The moment (ISO) the step commits a batch past what it had committed when the database
    first answered here: "step resumed". Polled every 50 ms."""
    base = topo.wait_for(
        lambda: (n := _committed_batches(topo, run_id, step)) is not None and (n,),
        timeout=300, what="the database answers", every=0.05,
    )[0]  # fmt: skip
    topo.wait_for(
        lambda: (_committed_batches(topo, run_id, step) or 0) > base,
        timeout=300, what=f"{step} commits a batch again", every=0.05,
    )  # fmt: skip
    return iso(now_utc()) or ""


def _check_quiet(topo: Topology, res: DrillResult) -> None:
    """No process restarted and nothing logged at CRITICAL (a consumer thread that fell over)."""
    log = topo.log_tail(10**8)
    res.expect("process exits in up.log", log.count(" exited with "), 0)
    res.expect("CRITICAL lines in up.log", log.count("CRITICAL"), 0)


def _export_leftovers(topo: Topology, run_id: str, published: list[str]) -> list[str]:
    """Files in the run's export directory other than `published`, and staged chunks or
    temporary files anywhere under the export directory (none once the run is over)."""
    run_dir = topo.exports / run_id
    found = [str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()]
    staged = [
        str(p.relative_to(topo.exports))
        for p in topo.exports.rglob("*")
        if p.is_file() and p.suffix in (".chunks", ".tmp")
    ]
    return sorted(set(found) - set(published)) + sorted(staged)


def _stale_gave_up(topo: Topology, role: str, run_id: str) -> str | None:
    """What the woken executor's step logged when it found its lease gone (None before)."""
    for line in topo.log_tail(10**8).splitlines()[-400:]:
        process, _, text = line.partition(" | ")
        if process.strip() != role or not text.startswith("{"):
            continue
        entry = json.loads(text)
        if entry.get("run_id") == run_id and "lease" in entry.get("message", ""):
            return entry["message"][:300]
    return None


def drill_postgres_restart(topo: Topology, res: DrillResult, records: int) -> None:
    """The drill's private PostgreSQL cluster is restarted (fast shutdown, 2 s down) while the
    table export runs; every process reconnects and the step resumes from its checkpoint."""
    n = RESTART_RECORDS
    generate_csv(topo.data / "customers.csv", n)
    run_id = topo.trigger(topo.create("pg-restart", import_plan()))[1]["id"]
    _, executor, done = await_batches(topo, run_id, "to_table", 5)
    assert topo.cluster is not None
    down_at, back_at = topo.cluster.restart(down_s=2)
    resumed_at = _await_resumed(topo, run_id, "to_table")
    run = topo.wait_run(run_id, timeout=900)
    res.add_run("run with PostgreSQL restarted mid-export", run)
    res.expect("run", run["status"], RunStatus.SUCCEEDED)
    step = step_of(run, "to_table")
    res.check(
        "to_table resumed without waiting out its lease (no lease_expired attempt)",
        LEASE_EXPIRED not in outcomes(step),
        outcomes(step),
    )
    check_exports(topo, res, run, n, jsonl=True)
    res.expect("API health after the restart", topo.call("GET", "/health", auth=False)[0], 200)
    res.figures["recovery"] = {
        "executor": executor,
        "batches_committed_before": done,
        "postgres_down_at": iso(down_at),
        "postgres_back_at": iso(back_at),
        "step_resumed_at": resumed_at,
        "postgres_back_to_step_resumed_s": seconds(back_at, resumed_at),
        "postgres_back_to_run_finished_s": seconds(back_at, run["finished_at"]),
        "to_table_attempts": outcomes(step),
    }


def drill_executor_frozen(topo: Topology, res: DrillResult, records: int) -> None:
    """The executor holding the file export is frozen (SIGSTOP) past its lease; the other one
    takes the step over and the run finishes; then the frozen one wakes (SIGCONT)."""
    n = RESTART_RECORDS
    generate_csv(topo.data / "customers.csv", n)
    run_id = topo.trigger(topo.create("frozen", import_plan()))[1]["id"]
    number, executor, _ = await_batches(topo, run_id, "to_file", 5)
    role = executor.split(":")[0]
    pid = topo.pid_of(role)
    os.kill(pid, signal.SIGSTOP)
    frozen_at = now_utc()
    run = topo.wait_run(run_id, timeout=900)
    query = "SELECT batches_done, outcome FROM attempts WHERE run_id = %s AND step_name = %s"
    frozen = topo.sql(query + " AND number = %s", run_id, "to_file", number)[0]
    os.kill(pid, signal.SIGCONT)
    woke_at = now_utc()
    gave_up = topo.wait_for(
        lambda: _stale_gave_up(topo, role, run_id),
        timeout=120, what="the woken executor notices its lease is gone",
    )  # fmt: skip
    time.sleep(1)  # whatever it still does after noticing, it has done by now
    res.add_run("run whose file-export executor was frozen past its lease", run)
    res.expect("run", run["status"], RunStatus.SUCCEEDED)
    step = step_of(run, "to_file")
    res.expect("frozen attempt's outcome", frozen[1], LEASE_EXPIRED)
    res.expect(
        "to_file attempt outcomes",
        outcomes(step),
        [AttemptOutcome.LEASE_EXPIRED, AttemptOutcome.SUCCEEDED],
    )
    after = topo.sql(query + " AND number = %s", run_id, "to_file", number)[0]
    res.expect("batches the stale executor committed after waking", after[0] - frozen[0], 0)
    res.expect(
        "files the stale executor left (export dir and stage)",
        _export_leftovers(topo, run_id, ["customers.jsonl"]),
        [],
    )
    check_exports(topo, res, run, n, jsonl=True)
    res.expect("live executor processes (the woken one stays up)", topo.pid_of(role), pid)
    takeover = (step["attempts"] + [{}, {}])[1]
    res.figures["recovery"] = {
        "process": role,
        "pid": pid,
        "frozen_at": iso(frozen_at),
        "lease_reaped_at": step["attempts"][0]["finished_at"],
        "resumed_at": takeover.get("started_at"),
        "resumed_on": takeover.get("executor"),
        "run_finished_at": run["finished_at"],
        "woken_at": iso(woke_at),
        "frozen_to_resumed_s": seconds(frozen_at, takeover.get("started_at")),
        "woken_executor_said": gave_up,
    }


def drill_connections_cut(topo: Topology, res: DrillResult, records: int) -> None:
    """Every backend of the executor running the table export is terminated
    (`pg_terminate_backend`) mid-step; the executor reconnects and the step goes on."""
    n = RESTART_RECORDS
    generate_csv(topo.data / "customers.csv", n)
    run_id = topo.trigger(topo.create("cut", import_plan(jsonl=False)))[1]["id"]
    _, executor, done = await_batches(topo, run_id, "to_table", 5)
    role = executor.split(":")[0]
    cut = topo.sql(
        "SELECT application_name, pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND application_name LIKE %s",
        f"etl-{role}%",
    )
    cut_at = now_utc()
    resumed_at = _await_resumed(topo, run_id, "to_table")
    run = topo.wait_run(run_id, timeout=900)
    res.add_run("run whose export executor lost all its connections", run)
    res.expect("run", run["status"], RunStatus.SUCCEEDED)
    step = step_of(run, "to_table")
    res.check("backends terminated (state, sandbox, heartbeat, broker)", len(cut) >= 3, cut)
    res.check(
        "to_table resumed without waiting out its lease (no lease_expired attempt)",
        LEASE_EXPIRED not in outcomes(step),
        outcomes(step),
    )
    check_exports(topo, res, run, n, jsonl=False)
    _check_quiet(topo, res)
    res.figures["recovery"] = {
        "executor": executor,
        "batches_committed_before": done,
        "backends_terminated": sorted(name for name, _ in cut),
        "cut_at": iso(cut_at),
        "step_resumed_at": resumed_at,
        "cut_to_step_resumed_s": seconds(cut_at, resumed_at),
        "cut_to_run_finished_s": seconds(cut_at, run["finished_at"]),
        "to_table_attempts": outcomes(step),
    }
