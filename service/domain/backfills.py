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
from typing import Any

from psycopg2.extras import Json

from dag import GLOBAL_ACTIVE_LIMIT, PIPELINE_ACTIVE_LIMIT, RunStatus, value_problem, value_range
from service.domain.audit import insert_audit
from service.domain.db import Cursor, execute, fetch_all, fetch_one
from service.domain.runs import Admission, Cancellation, admit_run, cancel_run, lock_admission
from service.errors import Conflict, NotFound, ServiceError, ValidationFailed

BACKFILL_ACTIVE_LIMIT = 2  # of the pipeline's 4 slots (1 running + 3 queued)
PRINCIPAL = "backfill"  # who admits a backfill's runs (`created_by`), after its creator


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
    pipeline's current plan; its view. `NotFound` for an unknown pipeline;
    `ValidationFailed` naming `param`, `from` or `to` when the plan declares no such `int`
    or `date` parameter or the range is empty, malformed or too long."""
    pipeline = fetch_one(
        cur, "get_pipeline", {"pipeline_id": pipeline_id, "include_deleted": False}
    )
    if pipeline is None:
        raise NotFound(f"pipeline {pipeline_id} not found")
    values = _range(pipeline["plan"], body)
    backfill_id = str(new_id())
    row = {
        "id": backfill_id,
        "pipeline_id": pipeline_id,
        "param": body["param"],
        "value_from": Json(body["from"]),
        "value_to": Json(body["to"]),
        "total": len(values),
        "created_by": principal,
    }
    execute(cur, "insert_backfill", row)
    execute(
        cur,
        "insert_backfill_values",
        {"backfill_id": backfill_id, "values": [Json(v) for v in values]},
    )
    details = {"pipeline_id": pipeline_id, "param": body["param"], "total": len(values)}
    _audit(cur, principal, "backfill.create", backfill_id, request_id, details)
    return get_backfill_view(cur, backfill_id)


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
    fit) stays pending and its backfill waits."""
    lock_admission(cur)
    admitted: list[Admission] = []
    total_active = fetch_one(cur, "count_all_active_runs", {}) or {"active": 0}
    room_total = GLOBAL_ACTIVE_LIMIT - total_active["active"]
    taken: dict[str, int] = {}  # admitted in this pass, per pipeline (the counts predate it)
    for backfill in fetch_all(cur, "list_waiting_backfills", {}):
        pipeline = str(backfill["pipeline_id"])
        room = min(
            BACKFILL_ACTIVE_LIMIT - backfill["backfilling"] - taken.get(pipeline, 0),
            PIPELINE_ACTIVE_LIMIT - backfill["active"] - taken.get(pipeline, 0),
            room_total,
            limit - len(admitted),
        )
        if backfill["paused"] or room <= 0:
            continue
        values = {"backfill_id": backfill["id"], "limit": room}
        pending = fetch_all(cur, "next_pending_values", values)
        batch = _admit_values(cur, backfill, pending, new_id)
        admitted += batch
        taken[pipeline] = taken.get(pipeline, 0) + len(batch)
        room_total -= len(batch)
    return admitted


def _admit_values(
    cur: Cursor, backfill: dict, pending: list[dict], new_id: Callable[[], uuid.UUID]
) -> list[Admission]:
    """Admit a backfill's next values behind one savepoint: a refusal (`ServiceError`)
    takes back this backfill's admissions of the pass, leaving its values pending."""
    backfill_id = str(backfill["id"])
    cur.execute("SAVEPOINT backfill_values")
    admitted: list[Admission] = []
    try:
        for value in pending:
            admission = admit_run(
                cur,
                str(backfill["pipeline_id"]),
                trigger_key(backfill_id, value["value"]),
                PRINCIPAL,
                params={backfill["param"]: value["value"]},
                new_id=new_id,
            )
            if admission.run["status"] == RunStatus.SKIPPED:
                raise Conflict("no room after all")  # never under the lock: room was counted
            run = {"backfill_id": backfill_id, "position": value["position"]}
            execute(cur, "set_backfill_run", {**run, "run_id": admission.run["id"]})
            admitted.append(admission)
    except ServiceError:
        cur.execute("ROLLBACK TO SAVEPOINT backfill_values")
        return []
    return admitted


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
