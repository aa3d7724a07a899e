"""Retention of intermediate outputs: what a finished run leaves behind is purged once it
finished more than the retention ago (`ETL_RETENTION_DAYS`, by the coordinator's sweep) or
on demand (`etl purge`).

A purge of one run removes, and nothing else:
- its steps' committed output batches (`step_batches`): dependents read them during the run,
  and a resume of a failed run reuses those of its succeeded steps;
- what an export step that never published staged: its sandbox staging table or the chunk
  folder of its file;
- the reject chunks of steps that never published their reject file.

The run, its steps (counters, digests, errors), attempts, the audit trail, published exports
and reject files stay. A purged failed run can no longer be resumed (the API answers 409).
Each run is purged in one state transaction holding the run row, so a concurrent resume
either goes first (the run is queued again and no longer purgeable) or sees `purged_at`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2

import connectors
from actors.sql import QUERIES
from actors.targets import target_impl
from dag.errors import PlanInvalid
from dag.plan import Plan, parse_plan

log = logging.getLogger("etl.purge")


@dataclass
class PurgeReport:
    runs: list[str] = field(default_factory=list)
    batches: int = 0  # step output batches deleted
    staging_tables: int = 0  # sandbox staging tables dropped
    stages: int = 0  # export and reject chunk folders removed
    withdrawn: int = 0  # published rows of steps that did not succeed, deleted
    failed: list[str] = field(default_factory=list)  # runs skipped after an error


def purge_finished_runs(
    conn,
    *,
    older_than_s: float,
    export_dir: Path,
    reject_dir: Path,
    connect_sandbox: Callable,
    limit: int | None = None,
) -> PurgeReport:
    """Purge the runs (at most `limit`; all when None) that finished at least `older_than_s`
    seconds ago, oldest first. Idempotent: a purge interrupted half-way is finished by the
    next one."""
    dirs = (export_dir, reject_dir)

    def purge(cur, row: tuple, sandbox: Callable, report: PurgeReport) -> None:
        run_id = str(row[0])
        _purge_run(cur, run_id, parse_plan(row[1]), dirs, sandbox, report)
        log.info("run purged", extra={"run_id": run_id})

    params = {"older_than_s": older_than_s}
    return _each_run(conn, "lock_purgeable_run", params, limit, connect_sandbox, purge)


def clear_unpublished_stages(
    conn,
    *,
    export_dir: Path,
    reject_dir: Path,
    connect_sandbox: Callable,
    limit: int = 20,
) -> PurgeReport:
    """Soon after a run ends (the sweep, every pass): remove what its steps that did not
    succeed staged and can never publish (export chunks, staging tables, reject chunks),
    and the rows such a step's table export published before its attempt ended without
    its final commit (a merge export's overwritten rows come back), for at most `limit`
    runs, oldest first. Succeeded steps keep their published marker; a succeeded merge
    export's undo table goes. A resume of the run starts those steps over, so nothing it needs is
    lost."""
    dirs = (export_dir, reject_dir)

    def clear(cur, row: tuple, sandbox: Callable, report: PurgeReport) -> None:
        run_id, unpublished = str(row[0]), set(row[2])
        steps = [s for s in _plan_steps(row[1]) if s.name in unpublished]
        _remove_stages(run_id, steps, dirs, sandbox, report)
        for step in steps:  # after its staging table: a late publish has nothing to move
            if step.type == "export":
                target = target_impl(step.config)
                report.withdrawn += target.withdraw(sandbox, run_id, step.name, step.config)
        for step in _plan_steps(row[1]):  # e.g. a merge that succeeded keeps its publish
            if step.name not in unpublished and step.type == "export":
                target_impl(step.config).settle(sandbox, run_id, step.name, step.config)
        cur.execute(QUERIES["mark_stages_cleared"], {"run_id": run_id})

    report = _each_run(conn, "lock_uncleared_run", {}, limit, connect_sandbox, clear)
    if report.stages or report.staging_tables or report.withdrawn:
        log.info(
            "cleared %d chunk folder(s), %d staging table(s) and %d published row(s) of"
            " unsucceeded steps of finished runs",
            report.stages,
            report.staging_tables,
            report.withdrawn,
        )
    return report


def _each_run(
    conn,
    query: str,
    params: dict,
    limit: int | None,
    connect_sandbox: Callable,
    clean: Callable[[Any, tuple, Callable, PurgeReport], None],
) -> PurgeReport:
    """`clean` each run that the locking `query` picks, one transaction per run holding its
    row, until none is left or `limit` runs are done. One run that cannot be cleaned
    (sandbox down, a file in the way) is skipped for this pass instead of blocking every
    newer run behind it. The sandbox connection is opened on first use, closed at the end."""
    report = PurgeReport()
    sandboxes: list = []

    def sandbox():
        if not sandboxes or sandboxes[0].closed:
            sandboxes[:] = [connect_sandbox()]
        return sandboxes[0]

    try:
        while limit is None or len(report.runs) < limit:
            with conn.cursor() as cur:
                cur.execute(QUERIES[query], {**params, "skip": report.failed})
                row = cur.fetchone()
                if row is None:
                    conn.rollback()
                    break
                try:
                    clean(cur, row, sandbox, report)
                except (OSError, psycopg2.Error, connectors.ConnectorError) as exc:
                    if conn.closed:
                        raise
                    conn.rollback()
                    report.failed.append(str(row[0]))
                    log.warning("run not cleaned: %s", exc, extra={"run_id": str(row[0])})
                    continue
            conn.commit()
            report.runs.append(str(row[0]))
    except BaseException:
        if not conn.closed:
            conn.rollback()
        raise
    finally:
        for c in sandboxes:
            c.close()
    return report


def _plan_steps(plan_json) -> tuple:
    """The steps of a stored plan; none for one that no longer validates (it never ran)."""
    try:
        return parse_plan(plan_json).steps
    except PlanInvalid:
        return ()


def _purge_run(
    cur, run_id: str, plan: Plan, dirs: tuple[Path, Path], sandbox: Callable, report: PurgeReport
) -> None:
    """Remove one run's leftovers, then its batches, in the caller's transaction (which holds
    the run row until it commits). `dirs` are the export and reject directories."""
    _remove_stages(run_id, plan.steps, dirs, sandbox, report)
    cur.execute(QUERIES["delete_run_batches"], {"run_id": run_id})
    report.batches += cur.rowcount
    cur.execute(QUERIES["drop_checkpoint_state"], {"run_id": run_id})
    cur.execute(QUERIES["mark_run_purged"], {"run_id": run_id})


def _remove_stages(
    run_id: str, steps, dirs: tuple[Path, Path], sandbox: Callable, report: PurgeReport
) -> None:
    """What `steps` of a run staged: reject chunks, and what an export's target staged (a
    table's staging table, the chunk folder of a file with a published file's marker)."""
    export_dir, reject_dir = dirs
    for step in steps:
        report.stages += connectors.reject_file(reject_dir, run_id, step.name).discard()
        if step.type != "export":
            continue
        removed = target_impl(step.config).remove_stage(
            run_id, step.name, step.config, export_dir, sandbox
        )
        report.stages += removed.stages
        report.staging_tables += removed.staging_tables
