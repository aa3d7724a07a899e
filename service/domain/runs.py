"""Runs: how they enter the queue (trigger, schedule fire, resume) and leave it early
(cancel), and how a run reads (`run_views`: the run with its steps and attempts, the shape the
REST API and the console show). Shared by the API, the console and the scheduler; nothing
here knows about HTTP.

Every function works on the caller's cursor, inside the caller's transaction, and writes its
audit row there. Admissions serialise on one transaction-scoped advisory lock, which makes
the limits exact across gunicorn workers and processes: per pipeline at most
`PIPELINE_ACTIVE_LIMIT` runs queued or running (1 running + 3 queued), in total at most
`GLOBAL_ACTIVE_LIMIT`. Lock order: the admission lock before any run row lock.

After COMMIT the caller wakes the dag-advancer when `needs_wake` says so; a lost wake-up is
re-sent by the coordinator's sweep, so a failed send is not an error."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from psycopg2.extras import Json

from dag import (
    GLOBAL_ACTIVE_LIMIT,
    PIPELINE_ACTIVE_LIMIT,
    PIPELINE_QUEUE_LIMIT,
    PIPELINE_RUNNING_LIMIT,
    RunStatus,
    SkipReason,
    StepStatus,
    parse_plan,
    steps_to_rerun,
    validate_plan,
)
from service.domain.audit import insert_audit
from service.domain.db import Cursor, execute, fetch_all, fetch_one
from service.domain.runparams import BoundParams, bind_params, check_same_params
from service.errors import Conflict, NotFound
from service.tracing import RunTrace

ADMISSION_LOCK_KEY = 0x45544C41  # "ETLA": one admission at a time, database-wide
# What a refusal says, in the words of the limits it hit.
SKIP_MESSAGES = {
    SkipReason.QUEUE_FULL: f"the pipeline already has {PIPELINE_RUNNING_LIMIT} running and"
    f" {PIPELINE_QUEUE_LIMIT} queued runs",
    SkipReason.BUSY: f"{GLOBAL_ACTIVE_LIMIT} runs are queued or running in total",
}


class AdmissionOutcome(StrEnum):
    """What a trigger or resume did (see `Admission`)."""

    CREATED = "created"
    EXISTING = "existing"
    SKIPPED = "skipped"
    REQUEUED = "requeued"
    REFUSED = "refused"


class CancelOutcome(StrEnum):
    """What a cancel did (see `Cancellation`)."""

    CANCELED = "canceled"
    CANCEL_REQUESTED = "cancel_requested"


@dataclass(frozen=True)
class Admission:
    """The outcome of `admit_run` or `resume_run` and the run row (as `get_run` reads it).

    outcome: `created` (a new queued run), `existing` (the trigger key's run, untouched),
    `skipped` (a new run recorded as skipped with `reason`), `requeued` (a resumed run),
    `refused` (a resume the limits turned down; the run stays failed; `reason` says why)."""

    outcome: str
    run: dict
    reason: str | None = None

    @property
    def needs_wake(self) -> bool:
        """True when the dag-advancer should look at the run after COMMIT."""
        return self.outcome in (AdmissionOutcome.CREATED, AdmissionOutcome.REQUEUED)


@dataclass(frozen=True)
class Cancellation:
    """The outcome of `cancel_run`: `canceled` (a queued run, at once) or `cancel_requested`
    (a running run; the executors stop at the next batch boundary)."""

    outcome: str
    run: dict

    @property
    def needs_wake(self) -> bool:
        """The advancer finalises or promotes; always worth a look."""
        return True


def get_run(cur: Cursor, run_id: str) -> dict | None:
    """A run row with its queue position, or None."""
    return fetch_one(cur, "get_run", {"run_id": run_id})


def lock_admission(cur: Cursor) -> None:
    """Take the admission lock until the end of the transaction."""
    execute(cur, "lock_admission", {"key": ADMISSION_LOCK_KEY})


def refusal_reason(cur: Cursor, pipeline_id: str) -> str | None:
    """Why a new active run of `pipeline_id` may not join the queue now, or None.
    Exact only under the admission lock."""
    counts = fetch_one(cur, "count_active_runs", {"pipeline_id": pipeline_id}) or {}
    if counts.get("pipeline_active", 0) >= PIPELINE_ACTIVE_LIMIT:
        return SkipReason.QUEUE_FULL
    if counts.get("total_active", 0) >= GLOBAL_ACTIVE_LIMIT:
        return SkipReason.BUSY
    return None


def admit_run(
    cur: Cursor,
    pipeline_id: str,
    trigger_key: str,
    principal: str,
    *,
    params: Mapping[str, Any] | None = None,
    builtins: Mapping[str, Any] | None = None,
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
    request_id: str | None = None,
    trace: RunTrace | None = None,
    locked: bool = False,
) -> Admission:
    """Admit a trigger of `pipeline_id` with `trigger_key` (1..200 chars) for `principal`,
    with parameter values `params` and built-ins `builtins` (a scheduled fire's interval).
    `locked`: the caller took the admission lock in this transaction (`lock_admission`;
    a backfill's pass admitting several values), so it is not asked for again.

    A key seen before for the pipeline returns its run whatever the status and creates
    nothing (`Conflict` code `params_mismatch` when it asks for other values). Otherwise a
    new run bound to the pipeline's current revision, its values bound
    (`service.domain.runparams`), is inserted as `queued`, or as `skipped` with reason
    `queue_full` / `busy` when a limit is reached, in `trace` (the trigger span's,
    `service.tracing`; default a new trace of its own). Raises `NotFound` for an unknown
    pipeline, `ValidationFailed` (code `invalid_params`) for values that do not fit,
    `Conflict` with code `pipeline_paused` for a paused one and `plan_invalid` when the
    current revision no longer passes validation."""
    given, builtins = params or {}, builtins or {}
    if not locked:
        lock_admission(cur)
    params = {"pipeline_id": pipeline_id, "include_deleted": False}
    pipeline = fetch_one(cur, "get_pipeline", params)
    if pipeline is None:
        raise NotFound(f"pipeline {pipeline_id} not found")
    key = {"pipeline_id": pipeline_id, "trigger_key": trigger_key}
    existing = fetch_one(cur, "find_run_by_trigger_key", key)
    if existing is not None:
        run = get_run(cur, existing["id"])
        assert run is not None
        check_same_params(pipeline["plan"], given, builtins, run)
        _audit_run(cur, principal, "run.trigger", run, AdmissionOutcome.EXISTING, request_id)
        return Admission(AdmissionOutcome.EXISTING, run, run["reason"])
    if pipeline["paused"]:
        raise Conflict(
            f"pipeline {pipeline_id} is paused: unpause it to trigger runs",
            code="pipeline_paused",
            details=[{"field": "pipeline", "message": "is paused"}],
        )
    check_runnable(pipeline["plan"], pipeline["revision"])
    run_id = str(new_id())
    bound = bind_params(pipeline["plan"], given, builtins, run_id)
    reason = refusal_reason(cur, pipeline_id)
    status = RunStatus.SKIPPED if reason else RunStatus.QUEUED
    row = {**key, "id": run_id, "revision": pipeline["revision"], "status": status}
    run = _insert_run(cur, {**row, "reason": reason, "created_by": principal}, trace, bound, new_id)
    outcome = AdmissionOutcome.SKIPPED if reason else AdmissionOutcome.CREATED
    _audit_run(cur, principal, "run.trigger", run, outcome, request_id)
    return Admission(outcome, run, reason)


def _insert_run(
    cur: Cursor,
    row: dict[str, Any],
    trace: RunTrace | None,
    bound: BoundParams,
    new_id: Callable[[], uuid.UUID],
) -> dict:
    """Insert a run `row` in `trace` (default a new trace of its own) with its values; the
    run as `get_run` reads it."""
    trace = trace or RunTrace.new(new_id)
    run = fetch_one(
        cur,
        "insert_run",
        {
            **row,
            "trace_id": trace.trace_id,
            "parent_span_id": trace.span_id,
            "trace_sampled": trace.sampled,
            "params": Json(bound.values),
            "plan": None if bound.plan is None else Json(bound.plan),
        },
    )
    assert run is not None
    return run


def cancel_run(
    cur: Cursor, run_id: str, principal: str, *, request_id: str | None = None
) -> Cancellation:
    """Cancel a queued run at once (its unfinished step rows too) or ask a running one to
    stop. Raises `NotFound`, or `Conflict` when the run has already finished."""
    row = fetch_one(cur, "lock_run", {"run_id": run_id})
    if row is None:
        raise NotFound(f"run {run_id} not found")
    if row["status"] == RunStatus.QUEUED:
        execute(cur, "cancel_queued_run", {"run_id": run_id})
        execute(cur, "cancel_step_runs", {"run_id": run_id})
        outcome = CancelOutcome.CANCELED
    elif row["status"] == RunStatus.RUNNING:
        execute(cur, "request_run_cancel", {"run_id": run_id})
        outcome = CancelOutcome.CANCEL_REQUESTED
    else:
        raise Conflict(f"run {run_id} is {row['status']}; only queued or running runs cancel")
    run = get_run(cur, run_id)
    assert run is not None
    _audit_run(cur, principal, "run.cancel", run, outcome, request_id)
    return Cancellation(outcome, run)


def resume_run(
    cur: Cursor, run_id: str, principal: str, *, request_id: str | None = None
) -> Admission:
    """Put a failed run back at the end of its pipeline's queue, under the same limits as a
    trigger. Steps that did not succeed start over (counters, checkpoint, digests, output
    batches cleared); succeeded steps keep their committed output; attempts stay as history.
    Raises `NotFound`, or `Conflict` unless the run is `failed`, not purged, of a pipeline
    that is not deleted (code `pipeline_deleted`) and its revision still a valid plan (code
    `plan_invalid`). A limit gives `refused`."""
    lock_admission(cur)
    row = fetch_one(cur, "lock_run", {"run_id": run_id})
    if row is None:
        raise NotFound(f"run {run_id} not found")
    if row["status"] != RunStatus.FAILED:
        raise Conflict(f"run {run_id} is {row['status']}; only a failed run can be resumed")
    if row["purged_at"] is not None:
        raise Conflict(
            f"run {run_id} cannot be resumed: its intermediate outputs were purged at"
            f" {row['purged_at'].isoformat()} (retention); trigger a new run"
        )
    live = {"pipeline_id": row["pipeline_id"], "include_deleted": False}
    if fetch_one(cur, "get_pipeline", live) is None:
        raise Conflict(
            f"run {run_id} cannot be resumed: its pipeline was deleted", code="pipeline_deleted"
        )
    key = {"pipeline_ids": [row["pipeline_id"]], "numbers": [row["revision"]]}
    stored = fetch_one(cur, "get_revision_plans", key)["plan"]
    check_runnable(stored, row["revision"])
    reason = refusal_reason(cur, row["pipeline_id"])
    if reason is None:
        execute(cur, "requeue_run", {"run_id": run_id})
        steps = fetch_all(cur, "list_step_runs", {"run_ids": [run_id]})
        rerun: tuple[str, ...] = ()
        if steps:  # all of a run's step rows are created when it starts, or none
            plan = parse_plan(stored)
            rerun = steps_to_rerun(plan, {s["name"]: s["status"] for s in steps})
        params = {"run_id": run_id, "step_names": list(rerun)}
        reset = [r["name"] for r in fetch_all(cur, "reset_step_runs", params)]
        execute(cur, "delete_step_batches", {"run_id": run_id, "step_names": reset})
    run = get_run(cur, run_id)
    assert run is not None
    outcome = AdmissionOutcome.REFUSED if reason else AdmissionOutcome.REQUEUED
    _audit_run(cur, principal, "run.resume", run, outcome, request_id, reason=reason)
    return Admission(outcome, run, reason)


def check_runnable(plan: Any, revision: int) -> None:
    """`Conflict` (code `plan_invalid`, the validator's messages as details) when revision
    `revision`'s plan no longer passes validation (accepted by an older release, or written
    by hand): a run of it could never start."""
    problems = validate_plan(plan)
    if problems:
        raise Conflict(
            f"revision {revision} of the pipeline is not a valid plan ({len(problems)}"
            " problem(s)); PATCH the pipeline with a valid plan",
            code="plan_invalid",
            details=[{"field": p.field, "message": p.message} for p in problems],
        )


def _audit_run(
    cur: Cursor,
    principal: str,
    action: str,
    run: dict,
    outcome: str,
    request_id: str | None,
    *,
    reason: str | None = None,
) -> None:
    details = {
        "outcome": outcome,
        "pipeline_id": str(run["pipeline_id"]),
        "trigger_key": run["trigger_key"],
        "status": run["status"],
        "reason": reason or run["reason"],
        "request_id": request_id,
    }
    insert_audit(
        cur,
        principal=principal,
        action=action,
        entity_type="run",
        entity_id=run["id"],
        details=details,
        trace_id=run["trace_id"],
    )


def list_run_resumes(cur: Cursor, run_id: str) -> list[Any]:
    """When the run was resumed by hand (accepted resumes of the audit), oldest first."""
    return [r["created_at"] for r in fetch_all(cur, "list_run_resumes", {"run_id": run_id})]


def get_run_view(cur: Cursor, run_id: str) -> dict:
    """One run with its steps and attempts; `NotFound` if unknown."""
    run = get_run(cur, run_id)
    if run is None:
        raise NotFound(f"run {run_id} not found")
    (view,) = run_views(cur, [run])
    return view


def run_views(cur: Cursor, runs: list[dict]) -> list[dict]:
    """Runs with their steps (from `step_runs`, or the revision's plan while none exist)
    and attempts, ready for `RunSchema`."""
    ids = [r["id"] for r in runs]
    steps: dict[str, list[dict]] = {}
    for s in fetch_all(cur, "list_step_runs", {"run_ids": ids}):
        steps.setdefault(s["run_id"], []).append(s)
    attempts: dict[str, list[dict]] = {}
    for a in fetch_all(cur, "list_attempts", {"run_ids": ids}):
        attempts.setdefault(a["run_id"], []).append(a)
    bare = [r for r in runs if r["id"] not in steps]
    plans: dict[tuple[str, int], dict] = {}
    if bare:
        params = {
            "pipeline_ids": [r["pipeline_id"] for r in bare],
            "numbers": [r["revision"] for r in bare],
        }
        for p in fetch_all(cur, "get_revision_plans", params):
            plans[(p["pipeline_id"], p["number"])] = p["plan"]
    return [
        run_view(
            r,
            steps.get(r["id"], []),
            attempts.get(r["id"], []),
            plans.get((r["pipeline_id"], r["revision"])),
        )
        for r in runs
    ]


def step_view(row: Mapping[str, Any], attempts: list[Mapping[str, Any]]) -> dict[str, Any]:
    """A `step_runs` row and its attempts as the API step; `columns` [[name, type], ...]
    becomes an ordered object."""
    view = dict(row)
    view["columns"] = {name: typ for name, typ in (row.get("columns") or [])}
    view["attempts"] = [dict(a) for a in attempts]
    return view


# The status of the steps of a run that never started: a queued run's steps are pending, a
# canceled one's canceled, a skipped one's (or a failed one's, whose plan was invalid) never run.
_UNSTARTED_STEP_STATUS = {
    RunStatus.CANCELED: StepStatus.CANCELED,
    RunStatus.SKIPPED: StepStatus.NOT_RUN,
    RunStatus.FAILED: StepStatus.NOT_RUN,  # its plan was invalid: it never started
}


def pending_step_view(
    step: Mapping[str, Any], run_status: str = RunStatus.QUEUED
) -> dict[str, Any]:
    """A plan step of a run that has no step rows (it never started): zero counters."""
    return {
        "name": step.get("name"),
        "type": step.get("type"),
        "status": _UNSTARTED_STEP_STATUS.get(run_status, StepStatus.PENDING),
        "attempts": [],
        "records_in": 0,
        "records_out": 0,
        "rejected": 0,
        "columns": {},
        "input_digest": None,
        "output_digest": None,
        "checkpoint": None,
        "error": None,
        "batches": 0,
        "row_errors": [],
        "checks": [],
        "schema_change": None,
        "cursor_range": None,
        "started_at": None,
        "finished_at": None,
    }


def run_view(
    run: Mapping[str, Any],
    step_rows: list[Mapping[str, Any]],
    attempt_rows: list[Mapping[str, Any]],
    plan: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """A run row, its step rows (plan order) and attempts (number order) as the contract's
    run; without step rows the steps come from the revision's `plan`, pending (or
    canceled / not_run when the run was canceled before it started or skipped)."""
    by_step: dict[str, list[Mapping[str, Any]]] = {}
    for a in attempt_rows:
        by_step.setdefault(a["step_name"], []).append(a)
    if step_rows:
        steps = [step_view(s, by_step.get(s["name"], [])) for s in step_rows]
    else:
        plan_steps = plan.get("steps") if isinstance(plan, Mapping) else None
        steps = [
            pending_step_view(s, run["status"])
            for s in (plan_steps if isinstance(plan_steps, list) else [])
            if isinstance(s, Mapping)
        ]
    failed = next((s for s in steps if s["status"] == StepStatus.FAILED), None)
    view = dict(run)
    run_error = view.pop("run_error", None)  # the run failed before a step could
    view["steps"] = steps
    view["error"] = run_error or (f"step {failed['name']}: {failed['error']}" if failed else None)
    return view
