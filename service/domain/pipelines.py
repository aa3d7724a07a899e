"""Pipelines and their revisions: a pipeline is a name and a current revision; every change of
its plan is a new numbered revision, and runs keep the revision they were triggered with.

Every function takes the caller's cursor and runs inside the caller's transaction, writing
its audit row there. A plan change locks the pipeline row first (the advancer's lock too), so
two changes never get the same number. Plans are checked by
`service.schemas.requests.check_plan` before they are stored.

A delete is soft (`deleted_at`): the row, its revisions and its runs stay, so the runs stay
readable; every pipeline read ignores it, and its name is free for a new pipeline. Lock
order of a delete: the pipeline row, its schedule rows (a fire in flight finishes first),
then the admission lock (`service.domain.runs`), so no run is admitted between the check for
active runs and the delete, then its webhooks and their pending deliveries
(`service.domain.webhooks`, whose changes lock the pipeline row first too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg2.extras

from service.domain.audit import audit_change
from service.domain.db import Cursor, execute, fetch_all, fetch_one
from service.domain.runs import lock_admission
from service.domain.webhooks import delete_pipeline_webhooks
from service.errors import Conflict, NotFound, PreconditionFailed
from service.schemas.requests import check_plan


def get_pipeline(cur: Cursor, pipeline_id: str, *, include_deleted: bool = False) -> dict:
    """The pipeline with its current plan; `NotFound` if unknown or deleted (unless
    `include_deleted`: a deleted pipeline's run pages still name it)."""
    params = {"pipeline_id": pipeline_id, "include_deleted": include_deleted}
    row = fetch_one(cur, "get_pipeline", params)
    if row is None:
        raise NotFound(f"pipeline {pipeline_id} not found")
    return row


def get_revision(cur: Cursor, pipeline_id: str, number: int) -> dict:
    """Revision `number` of a pipeline with its plan; `NotFound` if either is unknown."""
    row = fetch_one(cur, "get_revision", {"pipeline_id": pipeline_id, "number": number})
    if row is None:
        raise NotFound(f"revision {number} of pipeline {pipeline_id} not found")
    return row


@dataclass(frozen=True)
class OverviewPage:
    """One page of the console's pipeline list, by name: the rows, and the names to page on
    from (`?after=` the last for the next page, `?before=` the first for the previous one),
    None where there is no such page."""

    rows: list[dict]
    after: str | None
    before: str | None


def list_pipeline_overview(
    cur: Cursor, *, limit: int, after: str | None = None, before: str | None = None
) -> OverviewPage:
    """A keyset page of pipelines by name (those after `after`, or the page just before
    `before`), each with its last run that was not skipped and its live schedules' count and
    next fire: the console's pipeline list, bounded whatever the number of pipelines."""
    params = {"after": None if before is not None else after, "before": before}
    rows = fetch_all(cur, "list_pipeline_overview", {**params, "limit": limit + 1})
    more = len(rows) > limit
    if before is not None:
        rows = rows[1:] if more else rows
        earlier, later = more, True
    else:
        rows = rows[:limit]
        earlier, later = after is not None, more
    return OverviewPage(
        rows,
        after=rows[-1]["name"] if later and rows else None,
        before=rows[0]["name"] if earlier and rows else None,
    )


def saved_plan(cur: Cursor, pipeline_id: str, number: int | None) -> tuple[Any, int]:
    """The plan of revision `number` (the current one when None) and its number."""
    if number is None:
        row = get_pipeline(cur, pipeline_id)
        return row["plan"], row["revision"]
    return get_revision(cur, pipeline_id, number)["plan"], number


def create_pipeline(
    cur: Cursor, pipeline_id: str, name: str, plan: Any, principal: str, *, request_id: str
) -> dict:
    """A new pipeline `name` with revision 1 of `plan`, audited; `InvalidPlan` for an
    invalid plan, `Conflict` (code `duplicate_name`) when the name is taken."""
    check_plan(plan)
    if fetch_one(cur, "insert_pipeline", {"id": pipeline_id, "name": name}) is None:
        raise Conflict(
            f"a pipeline named {name!r} exists",
            code="duplicate_name",
            details=[{"field": "name", "message": "is already taken"}],
        )
    _insert_revision(cur, pipeline_id, 1, plan, principal)
    entity = f"pipeline:{pipeline_id}"
    audit_change(cur, principal, "pipeline.create", entity, request_id, name=name, revision=1)
    return get_pipeline(cur, pipeline_id)


def update_plan(
    cur: Cursor,
    pipeline_id: str,
    plan: Any,
    principal: str,
    *,
    if_match: str | None,
    request_id: str,
) -> dict:
    """The next revision of a pipeline with `plan`, audited, under the pipeline's lock.
    `NotFound` if unknown (whatever the plan); then `InvalidPlan` for an invalid plan (a
    malformed request is refused before its precondition is weighed); then
    `PreconditionFailed` when `if_match` (an `If-Match` header) names another revision than
    the current one."""
    current = fetch_one(cur, "lock_pipeline", {"pipeline_id": pipeline_id})
    if current is None:
        raise NotFound(f"pipeline {pipeline_id} not found")
    check_plan(plan)
    if if_match is not None and not revision_matches(if_match, current["revision"]):
        raise PreconditionFailed(
            f"If-Match {if_match} does not match the current revision {current['revision']}"
        )
    number = current["revision"] + 1
    _insert_revision(cur, pipeline_id, number, plan, principal)
    execute(cur, "update_pipeline_revision", {"pipeline_id": pipeline_id, "revision": number})
    audit_change(
        cur, principal, "pipeline.update", f"pipeline:{pipeline_id}", request_id, revision=number
    )
    return get_pipeline(cur, pipeline_id)


def set_paused(
    cur: Cursor, pipeline_id: str, paused: bool, principal: str, *, request_id: str
) -> dict:
    """Pause (no run is admitted: triggers answer 409 `pipeline_paused`, schedule fires make
    no run) or unpause a pipeline, audited; its runs admitted before go on. Idempotent.
    `NotFound` if unknown."""
    if (
        fetch_one(cur, "set_pipeline_paused", {"pipeline_id": pipeline_id, "paused": paused})
        is None
    ):
        raise NotFound(f"pipeline {pipeline_id} not found")
    action = "pipeline.pause" if paused else "pipeline.unpause"
    audit_change(cur, principal, action, f"pipeline:{pipeline_id}", request_id)
    return get_pipeline(cur, pipeline_id)


def delete_pipeline(cur: Cursor, pipeline_id: str, principal: str, *, request_id: str) -> None:
    """Delete a pipeline, audited: it answers 404 from then on, its schedules are deleted
    (they never fire again), so are its webhooks (their pending deliveries are canceled),
    its runs stay readable and its name is free. `NotFound` if
    unknown or deleted; `Conflict` (code `pipeline_active`) while it has queued or running
    runs (cancel them, or wait, first)."""
    pipeline = fetch_one(cur, "lock_pipeline", {"pipeline_id": pipeline_id})
    if pipeline is None:
        raise NotFound(f"pipeline {pipeline_id} not found")
    schedules = fetch_all(cur, "delete_pipeline_schedules", {"pipeline_id": pipeline_id})
    lock_admission(cur)
    active = fetch_one(cur, "count_pipeline_active_runs", {"pipeline_id": pipeline_id}) or {}
    if active.get("active", 0) > 0:
        raise Conflict(
            f"pipeline {pipeline['name']!r} has {active['active']} queued or running runs;"
            " cancel them or let them finish, then delete it",
            code="pipeline_active",
        )
    execute(cur, "mark_pipeline_deleted", {"pipeline_id": pipeline_id})
    webhooks, canceled = delete_pipeline_webhooks(cur, pipeline_id)
    audit_change(
        cur,
        principal,
        "pipeline.delete",
        f"pipeline:{pipeline_id}",
        request_id,
        name=pipeline["name"],
        schedules_deleted=len(schedules),
        webhooks_deleted=webhooks,
        deliveries_canceled=canceled,
    )


def revision_matches(if_match: str, revision: int) -> bool:
    """True when an `If-Match` header names `revision` (`3`, `"3"`, `W/"3"`, or `*`)."""
    for tag in if_match.split(","):
        tag = tag.strip().removeprefix("W/").strip('"')
        if tag == "*" or tag == str(revision):
            return True
    return False


def _insert_revision(cur: Cursor, pipeline_id: str, number: int, plan: Any, who: str) -> None:
    params = {
        "pipeline_id": pipeline_id,
        "number": number,
        "plan": psycopg2.extras.Json(plan),
        "created_by": who,
    }
    execute(cur, "insert_revision", params)
