"""The dag-advancer: moves a pipeline's runs forward under a lock on the pipeline row.

One call starts the FIFO head when nothing runs, asks `dag` which steps are ready under the
revision's policy, creates an attempt per ready step (and per due retry), marks the steps
that will never run, finalises a finished run and promotes the next queued one. It is
idempotent: a duplicate or late wake-up finds nothing to do. Messages are sent only after
the transaction commits; if the process dies in between, the sweep re-sends them."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from actors import lineage
from actors.broker import send_advance_run, send_run_step
from actors.cursors import advance_marks
from actors.sql import QUERIES
from actors.tracing import record_run_spans
from dag import Plan, PlanInvalid, RunStatus, StepStatus, decide, parse_plan
from ddl import Cursor

log = logging.getLogger("etl.advancer")


@dataclass
class Advance:
    """What one advance decided: attempts to wake, and when to look again."""

    attempts: list[tuple[int, str]] = field(default_factory=list)  # (attempt id, trace id)
    started_runs: list[tuple[str, str]] = field(default_factory=list)  # (run id, trace id)
    finished_runs: list[tuple[str, str]] = field(default_factory=list)  # (run id, status)
    recheck_in_s: float | None = None  # earliest pending retry


def advance_run(conn, run_id: str) -> Advance:
    """Advance the pipeline that `run_id` belongs to; see the module docstring."""
    with conn.cursor(cursor_factory=Cursor) as cur:
        cur.execute(QUERIES["get_run_pipeline"], {"run_id": run_id})
        row = cur.fetchone()
    conn.rollback()
    if row is None:
        return Advance()
    return advance_pipeline(conn, str(row["pipeline_id"]))


def advance_pipeline(conn, pipeline_id: str) -> Advance:
    """Advance one pipeline in one transaction; returns what was decided (committed)."""
    result = Advance()
    try:
        with conn.cursor(cursor_factory=Cursor) as cur:
            cur.execute(QUERIES["lock_pipeline"], {"pipeline_id": pipeline_id})
            if cur.fetchone() is None:
                conn.rollback()
                return result
            # A finished run promotes the next one, which may finish at once (e.g. canceled
            # steps only), so loop until a run is left running or the queue is empty.
            for _ in range(100):
                current = _current_run(cur, pipeline_id)
                if current is None:
                    break
                run, queued = current
                run_id, trace_id = str(run["id"]), run["trace_id"]
                try:  # validated once per advance, then used as a Plan
                    plan = parse_plan(run["plan"])
                except PlanInvalid as exc:  # one pipeline's bad revision must not jam others
                    _fail_unrunnable(cur, run_id, trace_id, run["revision"], exc.errors, result)
                    continue
                if queued:
                    _start_run(cur, run_id, plan)
                    result.started_runs.append((run_id, trace_id))
                cancel = bool(run["cancel_requested"])
                if not _advance_steps(cur, run_id, trace_id, cancel, plan, result):
                    break
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    lineage.runs_moved([run_id for run_id, _ in result.started_runs], result.finished_runs)
    record_run_spans(conn, [run_id for run_id, _status in result.finished_runs])
    return result


def _current_run(cur, pipeline_id: str) -> tuple[dict, bool] | None:
    """The pipeline's running run, else the head of its queue (True: it must start)."""
    key = {"pipeline_id": pipeline_id}
    cur.execute(QUERIES["get_pipeline_run"], {**key, "status": RunStatus.RUNNING})
    running = cur.fetchone()
    if running is not None:
        return running, False
    cur.execute(QUERIES["get_pipeline_run"], {**key, "status": RunStatus.QUEUED})
    head = cur.fetchone()
    return None if head is None else (head, True)


def _fail_unrunnable(
    cur, run_id: str, trace_id: str, revision: int, problems: list, result: Advance
) -> None:
    """A run whose revision no longer passes validation (accepted by an older release, or
    written by hand) fails at once with an error naming the revision and every problem."""
    listed = "; ".join(f"{p.field}: {p.message}" for p in problems)
    error = f"input_error: revision {revision} of the pipeline is not a valid plan: {listed}"
    cur.execute(QUERIES["fail_unrunnable_run"], {"run_id": run_id, "error": error})
    result.finished_runs.append((run_id, RunStatus.FAILED))
    log.error(
        "run failed: its plan is invalid: %s",
        listed,
        extra={"run_id": run_id, "trace_id": trace_id},
    )


def _start_run(cur, run_id: str, plan: Plan) -> None:
    cur.execute(QUERIES["start_run"], {"run_id": run_id})
    for position, step in enumerate(plan.steps):
        cur.execute(
            QUERIES["create_step_run"],
            {"run_id": run_id, "name": step.name, "type": step.type, "position": position},
        )


def _advance_steps(
    cur, run_id: str, trace_id: str, cancel_requested: bool, plan: Plan, result: Advance
) -> bool:
    """Apply the readiness decision to one running run; True if the run finished."""
    cur.execute(QUERIES["lock_step_runs"], {"run_id": run_id})
    rows = cur.fetchall()
    states = {r["name"]: r["status"] for r in rows}
    retrying = [r for r in rows if r["status"] == StepStatus.RETRY_WAIT]
    due_retries = [r["name"] for r in retrying if r["retry_due"]]
    waits = [r["retry_in_s"] for r in retrying if not r["retry_due"]]

    if cancel_requested:
        _cancel_unclaimed(cur, run_id, states)
    decision = decide(plan, states, cancel_requested=cancel_requested, due_retries=due_retries)
    for status, names in (
        (StepStatus.UPSTREAM_FAILED, decision.upstream_failed),
        (StepStatus.NOT_RUN, decision.not_run),
        (StepStatus.CANCELED, decision.canceled),
    ):
        for name in names:
            cur.execute(
                QUERIES["set_step_status"], {"run_id": run_id, "name": name, "status": status}
            )
            states[name] = status
    to_start = [*decision.ready, *decision.retries]
    if cancel_requested:
        waits = []
    for name in to_start:
        cur.execute(QUERIES["start_step"], {"run_id": run_id, "name": name})
        cur.execute(QUERIES["create_attempt"], {"run_id": run_id, "name": name})
        attempt = cur.fetchone()
        result.attempts.append((attempt["id"], trace_id))
        context = {"run_id": run_id, "step": name, "trace_id": trace_id}
        log.info("step started", extra={**context, "attempt": attempt["number"]})
    if waits:
        soonest = max(0.0, min(float(w) for w in waits))
        if result.recheck_in_s is None or soonest < result.recheck_in_s:
            result.recheck_in_s = soonest
    if decision.finished and not to_start:
        cur.execute(QUERIES["finish_run"], {"run_id": run_id, "status": decision.run_status})
        if decision.run_status == RunStatus.SUCCEEDED:
            advance_marks(cur, run_id)
        result.finished_runs.append((run_id, decision.run_status or RunStatus.FAILED))
        log.info(
            "run finished",
            extra={"run_id": run_id, "trace_id": trace_id, "status": decision.run_status},
        )
        return True
    return False


def _cancel_unclaimed(cur, run_id: str, states: dict[str, str]) -> None:
    """A canceled run's steps whose attempt no executor has claimed end canceled now: a
    claimed one stops at its next batch boundary, an unclaimed one would wait for an
    executor (down, or busy elsewhere) and keep the run, and its pipeline's queue, waiting."""
    cur.execute(QUERIES["cancel_unclaimed_attempts"], {"run_id": run_id})
    for row in cur.fetchall():
        states[row["name"]] = StepStatus.CANCELED
        log.info("unclaimed step canceled", extra={"run_id": run_id, "step": row["name"]})


def send_wakeups(broker, run_id: str, trace_id: str, result: Advance) -> None:
    """After commit: wake an executor per new attempt, and the advancer again at the
    earliest pending retry (the sweep covers a lost message either way)."""
    for attempt_id, attempt_trace in result.attempts:
        send_run_step(broker, attempt_id, attempt_trace)
    if result.recheck_in_s is not None:
        send_advance_run(broker, run_id, trace_id, delay_ms=int(result.recheck_in_s * 1000) + 50)
