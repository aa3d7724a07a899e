"""The coordinator's sweep: the database is the truth, messages are only wake-ups.

Every few seconds it reaps attempts whose lease ran out (the step continues from its
checkpoint in a new attempt, on any executor), re-sends wake-ups of attempts nobody claimed
(lost between a commit and a send, or stranded on a dead executor), and advances every
pipeline with queued or running runs (due retries, lost advancer messages, promotion).
Soon after a run ends it removes what its unsucceeded steps staged and can never publish
(export chunks, staging tables, reject chunks) and the rows their table exports published
before their attempt ended without its final commit. It folds the metric deltas that state
changes appended into their totals (`actors/metric_fold.py`). Every few minutes it also
purges what the retention lets go: runs' intermediate outputs and the broker's finished
messages."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2

from actors import lineage
from actors.advancer import advance_pipeline
from actors.broker import send_run_step
from actors.metric_fold import fold_metric_deltas
from actors.purge import clear_unpublished_stages, purge_finished_runs
from actors.sql import QUERIES
from dag import StepStatus
from ddl import Cursor, KeptSession, connection_lost

log = logging.getLogger("etl.sweep")
MAX_LEASE_EXPIRIES = 5  # a step that kills its executor again and again is failed


@dataclass
class SweepReport:
    reaped: list[tuple[str, str]] = field(default_factory=list)
    resent: list[int] = field(default_factory=list)
    advanced: int = 0
    stalled: list[str] = field(default_factory=list)


def reap_expired_leases(conn, broker) -> list[tuple[str, str]]:
    """End attempts whose lease expired and start the next attempt of each such step. A
    fused follower's step waits instead (pending, its checkpoint kept): the next attempt of
    its head adopts it again, or the advancer starts it once its upstream succeeded."""
    wake: list[tuple[int, str]] = []
    reaped: list[tuple[str, str]] = []
    try:
        with conn.cursor(cursor_factory=Cursor) as cur:
            cur.execute(QUERIES["reap_expired_leases"])
            # Lock step rows in the advancer's order (run, plan position): no deadlock
            # when two steps of one run lose their lease together.
            expired = sorted(cur.fetchall(), key=lambda r: (str(r["run_id"]), r["position"]))
            for lease in expired:
                run_id, step = lease["run_id"], lease["step_name"]
                reaped.append((str(run_id), step))
                keys = {"run_id": run_id, "name": step}
                cur.execute(QUERIES["get_step_for_takeover"], keys)
                row = cur.fetchone()
                if row is None or row["status"] != StepStatus.RUNNING:
                    continue
                if lease["fused"]:
                    cur.execute(QUERIES["unfuse_step"], keys)
                    continue
                trace_id = row["trace_id"]
                cur.execute(QUERIES["count_lease_expiries"], keys)
                if cur.fetchone()["expiries"] >= MAX_LEASE_EXPIRIES:
                    cur.execute(
                        QUERIES["finish_step"],
                        {**keys, "status": StepStatus.FAILED, "error": "lease expired too often"},
                    )
                    continue
                cur.execute(QUERIES["create_attempt"], keys)
                attempt = cur.fetchone()
                wake.append((attempt["id"], trace_id))
                log.warning(
                    "lease expired, step continues from its checkpoint",
                    extra={
                        "run_id": str(run_id),
                        "step": step,
                        "attempt": attempt["number"],
                        "trace_id": trace_id,
                    },
                )
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    lineage.steps_expired(reaped)
    for attempt_id, trace_id in wake:
        send_run_step(broker, attempt_id, trace_id)
    return reaped


def resend_unclaimed(conn, broker, *, older_than_s: float) -> list[int]:
    """Re-send the wake-up of open attempts nobody claimed for `older_than_s` seconds."""
    with conn.cursor(cursor_factory=Cursor) as cur:
        cur.execute(QUERIES["list_unclaimed_attempts"], {"older_than_s": older_than_s})
        rows = cur.fetchall()
    conn.rollback()
    for row in rows:
        send_run_step(broker, row["id"], row["trace_id"])
    return [row["id"] for row in rows]


def advance_active(conn, broker) -> int:
    """Advance every pipeline that has a queued or running run."""
    with conn.cursor(cursor_factory=Cursor) as cur:
        cur.execute(QUERIES["list_active_pipelines"])
        pipelines = [str(r["pipeline_id"]) for r in cur.fetchall()]
    conn.rollback()
    for pipeline_id in pipelines:
        try:
            result = advance_pipeline(conn, pipeline_id)
        except psycopg2.errors.DeadlockDetected:
            raise
        except Exception as exc:  # one pipeline's defect must not stop the others' sweep
            if isinstance(exc, psycopg2.OperationalError) or connection_lost(exc):
                raise
            log.exception("advance failed", extra={"pipeline_id": pipeline_id})
            continue
        for run_id, trace_id in result.started_runs:  # a run's log lines carry its trace id
            log.info("run started", extra={"run_id": run_id, "trace_id": trace_id})
        # Due retries are this sweep's job too, so only the new attempts need a wake-up.
        for attempt_id, trace_id in result.attempts:
            send_run_step(broker, attempt_id, trace_id)
    return len(pipelines)


def end_stalled_runs(conn, broker, *, after_s: float) -> list[str]:
    """End every running run that has had nothing runnable for `after_s` seconds (no open
    attempt, no retry to come, nothing finished since): its unfinished steps fail naming
    why and the advancer ends the run and promotes its pipeline's next one. With a correct
    advancer there is none; this guard keeps a defect from holding a pipeline for good."""
    ended: list[str] = []
    params = {"after_s": after_s, "run_id": None}
    with conn.cursor(cursor_factory=Cursor) as cur:
        cur.execute(QUERIES["list_stalled_runs"], params)
        stalled = [(str(r["id"]), str(r["pipeline_id"]), r["trace_id"]) for r in cur.fetchall()]
    conn.rollback()
    for run_id, pipeline_id, trace_id in stalled:
        try:
            with conn.cursor() as cur:
                cur.execute(QUERIES["lock_pipeline"], {"pipeline_id": pipeline_id})
                cur.execute(QUERIES["list_stalled_runs"], {**params, "run_id": run_id})
                if cur.fetchone() is None:  # it moved meanwhile
                    conn.rollback()
                    continue
                cur.execute(QUERIES["end_stalled_steps"], {**params, "run_id": run_id})
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        ended.append(run_id)
        log.error(
            "run stalled: nothing runnable for %g s, its unfinished steps fail",
            after_s,
            extra={"run_id": run_id, "trace_id": trace_id},
        )
        for attempt_id, attempt_trace in advance_pipeline(conn, pipeline_id).attempts:
            send_run_step(broker, attempt_id, attempt_trace)
    return ended


def purge_broker(conn, *, older_than_s: float) -> int:
    """Delete finished (done or rejected) broker messages older than `older_than_s`."""
    with conn.cursor() as cur:
        cur.execute(QUERIES["purge_broker_messages"], {"older_than_s": older_than_s})
        n = cur.rowcount
    conn.commit()
    return n


@dataclass(frozen=True)
class SweepSettings:
    """How often the sweep runs and what it purges: runs finished `retention_s` ago (at
    most `purge_runs_per_pass` a pass, every `purge_every_s`), and finished broker messages
    older than `broker_retention_s`."""

    every_s: float
    retention_s: float
    export_dir: Path
    reject_dir: Path
    purge_every_s: float = 300.0
    purge_runs_per_pass: int = 20
    broker_retention_s: float = 3600.0
    # A sweep failing every pass for this long stops the coordinator (a supervisor restarts it).
    give_up_after_s: float = 60.0
    # A running run with nothing runnable for this long is ended (the lease TTL).
    stalled_after_s: float = 30.0

    @property
    def unclaimed_after_s(self) -> float:
        return max(5.0, 2 * self.every_s)


def run_sweep(
    connect: Callable[[], Any],
    connect_sandbox: Callable[[], Any],
    broker,
    settings: SweepSettings,
    stop: threading.Event,
) -> bool:
    """The coordinator's sweep thread: a pass every `settings.every_s` until `stop` is set.
    A lost database is waited out; an unexpected error is logged and retried next pass.
    Returns False (and sets `stop`) when passes kept failing for `give_up_after_s`."""
    session = KeptSession(connect)
    failures = 0
    purge_due = time.monotonic()
    while not stop.wait(settings.every_s):
        try:
            conn = session.connection()
            sweep_once(
                conn,
                broker,
                unclaimed_after_s=settings.unclaimed_after_s,
                stalled_after_s=settings.stalled_after_s,
            )
            clear_unpublished_stages(
                conn,
                export_dir=settings.export_dir,
                reject_dir=settings.reject_dir,
                connect_sandbox=connect_sandbox,
            )
            fold_metric_deltas(conn)
            if time.monotonic() >= purge_due:
                more_due = purge_pass(conn, connect_sandbox, settings)
                purge_due = time.monotonic() + (0.0 if more_due else settings.purge_every_s)
        except Exception as exc:
            # a restart or a terminated session often surfaces as the rollback's InterfaceError
            if isinstance(exc, psycopg2.OperationalError) or connection_lost(exc):
                log.warning("sweep: database unavailable: %s", str(exc).strip())
                session.close()
                continue
            failures += 1
            log.exception("sweep failed (%d in a row)", failures)
            if failures * settings.every_s > settings.give_up_after_s:
                stop.set()
                session.close()
                return False
        else:
            failures = 0
    session.close()
    return True


def purge_pass(conn, connect_sandbox: Callable[[], Any], settings: SweepSettings) -> bool:
    """Purge runs past the retention (a bounded number) and old broker messages; True when
    more runs are due, so the next pass goes on at once."""
    purged = purge_finished_runs(
        conn,
        older_than_s=settings.retention_s,
        export_dir=settings.export_dir,
        reject_dir=settings.reject_dir,
        connect_sandbox=connect_sandbox,
        limit=settings.purge_runs_per_pass,
    )
    messages = purge_broker(conn, older_than_s=settings.broker_retention_s)
    if messages:
        log.info("purged %d finished broker messages", messages)
    return len(purged.runs) >= settings.purge_runs_per_pass


def sweep_once(
    conn, broker, *, unclaimed_after_s: float, stalled_after_s: float | None = None
) -> SweepReport:
    """One pass of the sweep; safe to run concurrently with everything else. With
    `stalled_after_s`, a run that had nothing runnable that long is ended too."""
    report = SweepReport()
    try:
        report.reaped = reap_expired_leases(conn, broker)
        report.resent = resend_unclaimed(conn, broker, older_than_s=unclaimed_after_s)
        report.advanced = advance_active(conn, broker)
        if stalled_after_s is not None:
            report.stalled = end_stalled_runs(conn, broker, after_s=stalled_after_s)
    except psycopg2.errors.DeadlockDetected as exc:  # the next pass picks it up
        conn.rollback()
        log.warning("sweep deadlock, retried next pass: %s", exc)
    return report


def release_own_leases(conn, broker, *, name: str, owner: str) -> int:
    """At executor start: expire the leases a previous incarnation with the same name still
    holds and reap them at once, instead of waiting out their TTL. Returns how many."""
    try:
        with conn.cursor() as cur:
            cur.execute(QUERIES["release_own_leases"], {"name_prefix": f"{name}:%", "owner": owner})
            n = cur.rowcount
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    if n:
        reap_expired_leases(conn, broker)
    return n
