"""Backfills: one planned run per value of a parameter's range, for the API (create, read,
cancel) and the coordinator's backfiller (`admit_waiting`, service/backfiller.py).

A backfill's values wait in `backfill_values` until the pipeline has room; each is then
admitted by `service.domain.runs.admit_run`, the admission of every trigger, with the key
`backfill:<id>:<value>` and `params {NAME: value}`, and its row takes the run's id in the
same transaction: a crash before COMMIT leaves it pending, after COMMIT admitted, and the
key makes a second admission find the first run. Values are admitted in ascending order and
the queue is FIFO, so they run in that order. A backfill takes at most
`BACKFILL_ACTIVE_LIMIT` of the pipeline's `PIPELINE_ACTIVE_LIMIT` slots, leaving the others
to schedule fires and manual triggers (docs/decisions.md); so it never meets `queue_full`
or `busy`: it waits instead.

Every function works on the caller's cursor, in the caller's transaction, and writes its
audit row there. Lock order: the admission lock, then backfill rows, then run rows. After
COMMIT the caller wakes the dag-advancer for each admission that `needs_wake`."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from psycopg2.extras import Json

from dag import (
    BACKFILL_ACTIVE_LIMIT,
    GLOBAL_ACTIVE_LIMIT,
    INTERVAL_FORMAT,
    MAX_RANGE_VALUES,
    PassRoom,
    RunStatus,
    interval_values,
    parse_interval_time,
    value_problem,
    value_range,
)
from service.domain.audit import insert_audit
from service.domain.db import Cursor, execute, fetch_all, fetch_one
from service.domain.runparams import bind_params
from service.domain.runs import Admission, Cancellation, admit_run, cancel_run, lock_admission
from service.domain.schedules import ScheduleSpec
from service.errors import Conflict, NotFound, ServiceError, ValidationFailed

PRINCIPAL = "backfill"  # who admits a backfill's runs (`created_by`), after its creator
INTERVAL_PARAM = "interval_end"  # the values of a backfill of a schedule's intervals


class BackfillStatus:
    """A backfill's status, derived from its values' runs."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"


def trigger_key(backfill_id: str, value: Any) -> str:
    """`backfill:<id>:<value>`, the key of a value's run."""
    return f"backfill:{backfill_id}:{value}"


def create_backfill(
    cur: Cursor,
    pipeline_id: str,
    body: dict[str, Any],
    principal: str,
    *,
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
    request_id: str | None = None,
) -> dict:
    """A backfill of `body["param"]` from `body["from"]` to `body["to"]` (inclusive) of the
    pipeline's current plan, or of the intervals of schedule `body["schedule_id"]` whose
    fires are in that range; its view. `NotFound` for an unknown pipeline;
    `ValidationFailed` naming `param`, `schedule_id`, `from` or `to` when the plan declares
    no such `int` or `date` parameter, the pipeline has no such live schedule, or the range
    is empty, malformed or too long, and naming `params.NAME` when a schedule's runs could
    not get a value the plan needs (a parameter without a default)."""
    pipeline = fetch_one(
        cur, "get_pipeline", {"pipeline_id": pipeline_id, "include_deleted": False}
    )
    if pipeline is None:
        raise NotFound(f"pipeline {pipeline_id} not found")
    interval = None
    if body.get("schedule_id") is not None:
        param = INTERVAL_PARAM
        values, interval = _schedule_range(cur, pipeline, body)
    else:
        param = body["param"]
        values = _range(pipeline["plan"], body)
    backfill_id = insert_backfill(
        cur,
        pipeline_id,
        param,
        values,
        principal,
        interval=interval,
        new_id=new_id,
        request_id=request_id,
    )
    return get_backfill_view(cur, backfill_id)


def _schedule_range(
    cur: Cursor, pipeline: dict, body: dict[str, Any]
) -> tuple[list[str], tuple[str, int]]:
    """The fire times (`INTERVAL_FORMAT`) of a live schedule of `pipeline` from `from` to
    `to` inclusive, and the backfill's (schedule id, interval seconds)."""
    schedule_id = str(body["schedule_id"])
    row = fetch_one(cur, "lock_schedule", {"schedule_id": schedule_id})
    if (
        row is None
        or row["deleted_at"] is not None
        or str(row["pipeline_id"]) != str(pipeline["id"])
    ):
        message = "names no live schedule of this pipeline"
        raise ValidationFailed(
            f"schedule_id: {message}", details=[{"field": "schedule_id", "message": message}]
        )
    ends = {}
    for end in ("from", "to"):
        try:
            ends[end] = parse_interval_time(body[end])
        except (TypeError, ValueError):
            message = "must be a fire time, YYYY-MM-DDTHH:MM:SSZ (UTC)"
            raise ValidationFailed(
                f"{end}: {message}", details=[{"field": end, "message": message}]
            ) from None
    spec = ScheduleSpec.from_row(row)
    times = spec.fires_between(ends["from"], ends["to"], MAX_RANGE_VALUES + 1)
    problem = (
        "no fire of the schedule from `from` to `to`" if not times
        else f"at most {MAX_RANGE_VALUES} values" if len(times) > MAX_RANGE_VALUES
        else None
    )  # fmt: skip
    if problem:
        raise ValidationFailed(f"to: {problem}", details=[{"field": "to", "message": problem}])
    bind_params(pipeline["plan"], {}, spec.interval_params(times[0]), "run")  # 400 params.NAME
    return [t.strftime(INTERVAL_FORMAT) for t in times], (spec.id, int(spec.period.total_seconds()))


def insert_backfill(
    cur: Cursor,
    pipeline_id: str,
    param: str,
    values: list[Any],
    principal: str,
    *,
    interval: tuple[str, int] | None = None,
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
    request_id: str | None = None,
) -> str:
    """A backfill of `values` (ascending, checked by the caller) with its audit row; its
    id. `interval`: (schedule id, interval seconds) of a backfill of a schedule's intervals,
    whose values are fire times (`interval_end`) and whose runs get the interval built-ins."""
    backfill_id = str(new_id())
    schedule_id, interval_s = interval or (None, None)
    row = {
        "id": backfill_id,
        "pipeline_id": pipeline_id,
        "param": param,
        "value_from": Json(values[0]),
        "value_to": Json(values[-1]),
        "total": len(values),
        "created_by": principal,
        "schedule_id": schedule_id,
        "interval_s": interval_s,
    }
    execute(cur, "insert_backfill", row)
    execute(
        cur,
        "insert_backfill_values",
        {"backfill_id": backfill_id, "values": [Json(v) for v in values]},
    )
    details = {"pipeline_id": pipeline_id, "param": param, "total": len(values)}
    if schedule_id is not None:
        details["schedule_id"] = schedule_id
    _audit(cur, principal, "backfill.create", backfill_id, request_id, details)
    return backfill_id


def _range(plan: Any, body: dict[str, Any]) -> list[Any]:
    param = body["param"]
    declared = plan.get("params") if isinstance(plan, dict) else None
    declared = declared if isinstance(declared, dict) else {}
    kind = (declared.get(param) or {}).get("type")
    if kind not in ("int", "date"):
        names = ", ".join(n for n, s in declared.items() if s.get("type") in ("int", "date"))
        raise ValidationFailed(
            f"the plan declares no int or date parameter {param!r} (it has: {names or 'none'})",
            details=[{"field": "param", "message": "names no int or date parameter of the plan"}],
        )
    for end in ("from", "to"):
        if problem := value_problem(kind, body[end]):
            raise ValidationFailed(
                f"{end}: {problem}", details=[{"field": end, "message": problem}]
            )
    try:
        return value_range(kind, body["from"], body["to"])
    except ValueError as exc:
        raise ValidationFailed(str(exc), details=[{"field": "to", "message": str(exc)}]) from None


def get_backfill_view(cur: Cursor, backfill_id: str) -> dict:
    """A backfill as the API shows it: counters, status and each value's run; `NotFound`."""
    row = fetch_one(cur, "get_backfill", {"backfill_id": backfill_id})
    if row is None:
        raise NotFound(f"backfill {backfill_id} not found")
    runs = fetch_all(cur, "list_backfill_runs", {"backfill_id": backfill_id})
    canceled = row["canceled_at"] is not None
    view = dict(row)
    view["status"] = backfill_status(row)
    view["runs"] = [
        {
            "value": r["value"],
            "run_id": r["run_id"],
            "status": r["status"] or (BackfillStatus.CANCELED if canceled else "pending"),
        }
        for r in runs
    ]
    return view


def backfill_status(row: dict) -> str:
    """`canceled` once canceled; `running` while a value waits or runs; then `failed` when
    a value's run did not succeed, else `succeeded`."""
    if row["canceled_at"] is not None:
        return BackfillStatus.CANCELED
    if row["pending"] or row["active"]:
        return BackfillStatus.RUNNING
    return BackfillStatus.FAILED if row["failed"] else BackfillStatus.SUCCEEDED


def cancel_backfill(
    cur: Cursor, backfill_id: str, principal: str, *, request_id: str | None = None
) -> tuple[dict, list[Cancellation]]:
    """Drop the pending values and cancel the queued and running runs; the view and the
    runs' cancellations (to wake the advancer for). `NotFound`; `Conflict` when the
    backfill was canceled before or has finished."""
    lock_admission(cur)
    row = fetch_one(cur, "lock_backfill", {"backfill_id": backfill_id})
    if row is None:
        raise NotFound(f"backfill {backfill_id} not found")
    status = backfill_status(fetch_one(cur, "get_backfill", {"backfill_id": backfill_id}) or {})
    if status != BackfillStatus.RUNNING:
        raise Conflict(f"backfill {backfill_id} is {status}; only a running one cancels")
    execute(cur, "cancel_backfill", {"backfill_id": backfill_id})
    changes = [
        cancel_run(cur, str(r["id"]), principal, request_id=request_id)
        for r in fetch_all(cur, "list_backfill_active_runs", {"backfill_id": backfill_id})
    ]
    _audit(cur, principal, "backfill.cancel", backfill_id, request_id, {"runs": len(changes)})
    return get_backfill_view(cur, backfill_id), changes


def admit_waiting(
    cur: Cursor, *, new_id: Callable[[], uuid.UUID] = uuid.uuid4, limit: int = 50
) -> list[Admission]:
    """Admit the next pending values of every live backfill whose pipeline has room (fewer
    than `BACKFILL_ACTIVE_LIMIT` active runs of backfills and fewer than
    `PIPELINE_ACTIVE_LIMIT` in all, not paused, fewer than `GLOBAL_ACTIVE_LIMIT` active on
    the platform), oldest backfill first, at most `limit` in all. A value whose admission
    is refused (the pipeline was paused, the plan stopped validating, its values no longer
    fit) stays pending and its backfill waits. One statement reads the whole pass's room
    and values (bench/backfill_365.py: round trips are what a pass costs)."""
    lock_admission(cur)
    admitted: list[Admission] = []
    waiting = fetch_all(cur, "list_waiting_backfills", {"per_backfill": BACKFILL_ACTIVE_LIMIT})
    total = GLOBAL_ACTIVE_LIMIT - (waiting[0]["total_active"] if waiting else 0)
    room = PassRoom(total=total, left=limit)
    for backfill in waiting:
        pipeline = str(backfill["pipeline_id"])
        free = room.of(pipeline, backfill["backfilling"], backfill["active"])
        if backfill["paused"] or free <= 0:
            continue
        pending = list(zip(backfill["positions"], backfill["values"], strict=True))[:free]
        batch = _admit_values(cur, backfill, pending, new_id)
        admitted += batch
        room.take(pipeline, len(batch))
    return admitted


def _admit_values(
    cur: Cursor,
    backfill: dict,
    pending: list[tuple[int, Any]],
    new_id: Callable[[], uuid.UUID],
) -> list[Admission]:
    """Admit a backfill's next values (position, value) behind one savepoint, under the
    admission lock the pass holds: a refusal (`ServiceError`) takes back this backfill's
    admissions of the pass, leaving its values pending."""
    backfill_id = str(backfill["id"])
    cur.execute("SAVEPOINT backfill_values")
    admitted: list[Admission] = []
    try:
        for _position, value in pending:
            params, builtins = _values_of(backfill, value)
            admission = admit_run(
                cur,
                str(backfill["pipeline_id"]),
                trigger_key(backfill_id, value),
                PRINCIPAL,
                params=params,
                builtins=builtins,
                new_id=new_id,
                locked=True,
            )
            if admission.run["status"] == RunStatus.SKIPPED:
                raise Conflict("no room after all")  # never under the lock: room was counted
            admitted.append(admission)
        runs = {
            "backfill_id": backfill_id,
            "positions": [position for position, _ in pending],
            "run_ids": [str(a.run["id"]) for a in admitted],
        }
        execute(cur, "set_backfill_runs", runs)
    except ServiceError:
        cur.execute("ROLLBACK TO SAVEPOINT backfill_values")
        return []
    return admitted


def commit_asynchronously(cur: Cursor) -> None:
    """Make the transaction's commit return before its WAL is flushed (a backfiller's
    admission pass). Safe for them: a pass is one transaction, so what a PostgreSQL crash
    can take back is a whole pass (its runs, their audit rows and the values' run ids
    together: the values are pending again and admitted again under the same keys), and
    every later durable commit (the advancer starting one of those runs) flushes it first."""
    execute(cur, "commit_asynchronously", {})


def _values_of(backfill: dict, value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The given values and built-ins of a value's run: `{param: value}`, or for a backfill
    of a schedule's intervals the interval the fire time `value` closes."""
    if backfill.get("interval_s"):
        period = timedelta(seconds=backfill["interval_s"])
        return {}, interval_values(parse_interval_time(value), period)
    return {backfill["param"]: value}, {}


def _audit(
    cur: Cursor,
    principal: str,
    action: str,
    backfill_id: str,
    request_id: str | None,
    details: dict[str, Any],
) -> None:
    insert_audit(
        cur,
        principal=principal,
        action=action,
        entity_type="backfill",
        entity_id=backfill_id,
        details={**details, "request_id": request_id},
    )
