"""Falcon resources of the REST API (README.md). Each declares the roles allowed per HTTP
method (enforced by `service.auth.AuthMiddleware`), reads its body through `read_json`
(413, 415, 400 in that order), does its work in one transaction, and dumps with
`service.schemas`. Run answers carry the run's trace id as `X-Trace-Id`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import falcon
import psycopg2.extras
from marshmallow import Schema

from service import listing, schemas
from service.admission import (
    SKIP_MESSAGES,
    Admission,
    AdmissionOutcome,
    Cancellation,
    admit_run,
    cancel_run,
    next_fire_at,
    resume_run,
)
from service.auth import ADMIN_ONLY, OPERATE, READ
from service.db import Cursor, execute, fetch_all, fetch_one, insert_audit
from service.deps import Deps
from service.errors import (
    Conflict,
    LengthRequired,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
)

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024

PIPELINE = schemas.PipelineSchema()
REVISION = schemas.RevisionSchema()
RUN = schemas.RunSchema()
SCHEDULE = schemas.ScheduleSchema()


def read_json(req: falcon.Request, schema: Schema, *, optional: bool = False) -> dict[str, Any]:
    """The request body loaded through `schema` (see `schemas.load_body`). Bodies over
    `MAX_BODY_BYTES` -> 413, judged by Content-Length first and by a capped read too."""
    if (req.content_length or 0) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"the body exceeds {MAX_BODY_BYTES} bytes")
    raw = read_body(req, MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"the body exceeds {MAX_BODY_BYTES} bytes")
    return schemas.load_body(raw, req.content_type, schema, optional=optional)


def page_params(req: falcon.Request) -> dict[str, Any]:
    """`limit` and `before` of a list request (see `service.listing`)."""
    return {"limit": listing.parse_limit(req.get_param("limit")), "before": req.get_param("before")}


def read_body(req: falcon.Request, max_bytes: int) -> bytes:
    """At most `max_bytes` of the body. A body without Content-Length (`Transfer-Encoding:
    chunked`) is read from the server's input, which ends it (gunicorn decodes the chunks);
    a server that cannot end it gets 411 rather than a body silently taken as empty."""
    if req.content_length is not None or req.get_header("Transfer-Encoding") is None:
        return req.bounded_stream.read(max_bytes)
    if not req.env.get("wsgi.input_terminated"):
        raise LengthRequired(
            "send a Content-Length header (this server cannot read chunked bodies)"
        )
    parts: list[bytes] = []
    size = 0
    while size < max_bytes:
        part = req.stream.read(max_bytes - size)
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)


def get_pipeline(cur: Cursor, pipeline_id: str) -> dict:
    """The pipeline with its current plan; `NotFound` if unknown."""
    row = fetch_one(cur, "get_pipeline", {"pipeline_id": pipeline_id})
    if row is None:
        raise NotFound(f"pipeline {pipeline_id} not found")
    return row


def fetch_run_views(cur: Cursor, runs: list[dict]) -> list[dict]:
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
        schemas.run_view(
            r,
            steps.get(r["id"], []),
            attempts.get(r["id"], []),
            plans.get((r["pipeline_id"], r["revision"])),
        )
        for r in runs
    ]


def answer_run(resp: falcon.Response, status: int, view: dict, extra: dict | None = None) -> None:
    """Answer with one run (plus `extra` top-level fields) and its `X-Trace-Id`."""
    resp.status = status
    resp.media = {**RUN.dump(view), **(extra or {})}
    resp.set_header("X-Trace-Id", view["trace_id"])


class Resource:
    """Base of the API's resources: the dependencies, the audit row of a change, and the
    advancer's wake-up after COMMIT. Subclasses declare `roles` per HTTP method."""

    def __init__(self, deps: Deps):
        self.deps = deps

    def audit(self, cur: Cursor, req: falcon.Request, action: str, entity: str, **kw: Any) -> None:
        """An audit row for `action` on `entity` ("type:id") by the caller; the trace id of
        a non-run change is the request id."""
        entity_type, _, entity_id = entity.partition(":")
        insert_audit(
            cur,
            principal=req.context.principal.name,
            action=action,
            entity_type=entity_type,
            entity_id=entity_id,
            details=kw,
            trace_id=req.context.request_id,
        )

    def wake(self, run: dict) -> None:
        """Wake the dag-advancer for `run` (see `wake_run`)."""
        wake_run(self.deps, run)


def wake_run(deps: Deps, run: dict) -> None:
    """Wake the dag-advancer for `run` after COMMIT; the sweep re-sends a lost wake-up, so
    a failure here is only logged."""
    try:
        deps.wake_run(str(run["id"]), run["trace_id"])
    except Exception:
        log.exception("could not wake run %s; the sweep will", run["id"])


class HealthResource(Resource):
    public = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            with self.deps.db.transaction() as cur:
                execute(cur, "check_database")
        except Exception as exc:
            log.warning("health check: database unavailable: %s", exc)
            resp.status = 503
            resp.media = {"status": "error", "database": "unavailable"}
            return
        resp.media = {"status": "ok", "database": "ok"}


class PipelinesResource(Resource):
    roles = {"GET": READ, "POST": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        name = req.get_param("name")
        with self.deps.db.transaction() as cur:
            page = listing.list_pipelines(cur, name=name, **page_params(req))
        resp.media = listing.page_body(listing.PIPELINE_SUMMARY, page)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req, schemas.PipelineCreateSchema())
        schemas.check_plan(body["plan"])
        pipeline_id, who = str(self.deps.new_id()), req.context.principal.name
        with self.deps.db.transaction() as cur:
            if fetch_one(cur, "insert_pipeline", {"id": pipeline_id, "name": body["name"]}) is None:
                raise Conflict(
                    f"a pipeline named {body['name']!r} exists",
                    code="duplicate_name",
                    details=[{"field": "name", "message": "is already taken"}],
                )
            plan = psycopg2.extras.Json(body["plan"])
            revision = {"pipeline_id": pipeline_id, "number": 1, "plan": plan, "created_by": who}
            execute(cur, "insert_revision", revision)
            entity = f"pipeline:{pipeline_id}"
            self.audit(cur, req, "pipeline.create", entity, name=body["name"], revision=1)
            row = get_pipeline(cur, pipeline_id)
        resp.status = 201
        resp.location = f"{req.path}/{pipeline_id}"
        resp.etag = f'"{row["revision"]}"'
        resp.media = PIPELINE.dump(row)


class PipelineResource(Resource):
    roles = {"GET": READ, "PATCH": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with self.deps.db.transaction() as cur:
            row = get_pipeline(cur, str(pipeline_id))
        resp.etag = f'"{row["revision"]}"'
        resp.media = PIPELINE.dump(row)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        pipeline_id, who = str(pipeline_id), req.context.principal.name
        body = read_json(req, schemas.PipelinePatchSchema())
        with self.deps.db.transaction() as cur:
            current = fetch_one(cur, "lock_pipeline", {"pipeline_id": pipeline_id})
            if current is None:
                raise NotFound(f"pipeline {pipeline_id} not found")
            expected = req.get_header("If-Match")
            if expected is not None and not _matches(expected, current["revision"]):
                raise PreconditionFailed(
                    f"If-Match {expected} does not match the current revision {current['revision']}"
                )
            schemas.check_plan(body["plan"])
            number = current["revision"] + 1
            plan = psycopg2.extras.Json(body["plan"])
            execute(
                cur,
                "insert_revision",
                {"pipeline_id": pipeline_id, "number": number, "plan": plan, "created_by": who},
            )
            params = {"pipeline_id": pipeline_id, "revision": number}
            execute(cur, "update_pipeline_revision", params)
            self.audit(cur, req, "pipeline.update", f"pipeline:{pipeline_id}", revision=number)
            row = get_pipeline(cur, pipeline_id)
        resp.etag = f'"{number}"'
        resp.media = PIPELINE.dump(row)


def _matches(if_match: str, revision: int) -> bool:
    """True when an `If-Match` header names `revision` (`3`, `"3"`, `W/"3"`, or `*`)."""
    for tag in if_match.split(","):
        tag = tag.strip().removeprefix("W/").strip('"')
        if tag == "*" or tag == str(revision):
            return True
    return False


class RevisionsResource(Resource):
    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with self.deps.db.transaction() as cur:
            get_pipeline(cur, str(pipeline_id))
            page = listing.list_revisions(cur, pipeline_id=str(pipeline_id), **page_params(req))
        resp.media = listing.page_body(listing.REVISION_SUMMARY, page)


class RevisionResource(Resource):
    roles = {"GET": READ}

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any, number: int
    ) -> None:
        params = {"pipeline_id": str(pipeline_id), "number": number}
        with self.deps.db.transaction() as cur:
            row = fetch_one(cur, "get_revision", params)
        if row is None:
            raise NotFound(f"revision {number} of pipeline {pipeline_id} not found")
        resp.media = REVISION.dump(row)


class PipelineRunsResource(Resource):
    roles = {"GET": READ, "POST": OPERATE}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        params = page_params(req)
        status = req.get_param("status")
        with self.deps.db.transaction() as cur:
            get_pipeline(cur, str(pipeline_id))
            page = listing.list_runs(cur, status=status, pipeline_id=str(pipeline_id), **params)
        resp.media = listing.page_body(listing.RUN_SUMMARY, page)

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        body = read_json(req, schemas.RunTriggerSchema(), optional=True)
        key = body.get("trigger_key") or f"manual:{self.deps.new_id()}"
        with self.deps.db.transaction() as cur:
            admission = admit_run(
                cur,
                str(pipeline_id),
                key,
                req.context.principal.name,
                new_id=self.deps.new_id,
                request_id=req.context.request_id,
            )
            (view,) = fetch_run_views(cur, [admission.run])
        if admission.needs_wake:
            self.wake(admission.run)
        status = _TRIGGER_STATUS[admission.outcome]
        skipped = admission.outcome == AdmissionOutcome.SKIPPED
        extra = {"error": _refusal(admission)} if skipped else None
        answer_run(resp, status, view, extra)


_TRIGGER_STATUS = {
    AdmissionOutcome.CREATED: 201,
    AdmissionOutcome.EXISTING: 200,
    AdmissionOutcome.SKIPPED: 429,
}


def _refusal(admission: Admission) -> dict:
    message = SKIP_MESSAGES.get(admission.reason or "", "refused")
    return {"code": admission.reason, "message": message, "details": []}


class RunsResource(Resource):
    """`GET /runs?status=&pipeline_id=`: every pipeline's runs, newest first."""

    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        status, pipeline_id = req.get_param("status"), req.get_param("pipeline_id")
        with self.deps.db.transaction() as cur:
            page = listing.list_runs(
                cur, status=status, pipeline_id=pipeline_id, **page_params(req)
            )
        resp.media = listing.page_body(listing.RUN_SUMMARY, page)


class RunResource(Resource):
    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response, run_id: Any) -> None:
        with self.deps.db.transaction() as cur:
            run = fetch_one(cur, "get_run", {"run_id": str(run_id)})
            if run is None:
                raise NotFound(f"run {run_id} not found")
            (view,) = fetch_run_views(cur, [run])
        answer_run(resp, 200, view)


class _RunAction(Resource):
    """POST /runs/{id}/cancel and /runs/{id}/resume: one path, only `act` differs. A change
    answers 202; a resume the limits refuse answers 429 with the run (it stays failed)."""

    roles = {"POST": OPERATE}
    act: Callable[..., Admission | Cancellation]

    def on_post(self, req: falcon.Request, resp: falcon.Response, run_id: Any) -> None:
        read_json(req, schemas.EmptyBodySchema(), optional=True)
        with self.deps.db.transaction() as cur:
            change = self.act(
                cur, str(run_id), req.context.principal.name, request_id=req.context.request_id
            )
            (view,) = fetch_run_views(cur, [change.run])
        if change.needs_wake:
            self.wake(change.run)
        if change.outcome == AdmissionOutcome.REFUSED:
            extra = {"error": _refusal(change), "reason": change.reason}
            answer_run(resp, 429, view, extra)
        else:
            answer_run(resp, 202, view)


class RunCancelResource(_RunAction):
    act = staticmethod(cancel_run)


class RunResumeResource(_RunAction):
    act = staticmethod(resume_run)


class SchedulesResource(Resource):
    roles = {"GET": READ, "POST": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with self.deps.db.transaction() as cur:
            get_pipeline(cur, str(pipeline_id))
            page = listing.list_schedules(cur, pipeline_id=str(pipeline_id), **page_params(req))
        resp.media = listing.page_body(listing.SCHEDULE_SUMMARY, page)

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        body = read_json(req, schemas.ScheduleCreateSchema())
        with self.deps.db.transaction() as cur:
            row = create_schedule(
                cur,
                self.deps,
                str(pipeline_id),
                body,
                req.context.principal.name,
                request_id=req.context.request_id,
            )
        resp.status = 201
        resp.location = f"{req.path}/{row['id']}"
        resp.media = SCHEDULE.dump(row)


class ScheduleResource(Resource):
    roles = {"DELETE": ADMIN_ONLY}

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any, schedule_id: Any
    ) -> None:
        with self.deps.db.transaction() as cur:
            delete_schedule(
                cur,
                str(pipeline_id),
                str(schedule_id),
                req.context.principal.name,
                request_id=req.context.request_id,
            )
        resp.status = 204


def create_schedule(
    cur: Cursor, deps: Deps, pipeline_id: str, body: dict, principal: str, *, request_id: str
) -> dict:
    """Insert a schedule of `pipeline_id` from a loaded `ScheduleCreateSchema` body, with its
    audit row; returns the schedule row. `NotFound` for an unknown pipeline."""
    every, daily = body.get("every_minutes"), body.get("daily_at")
    now = deps.now()
    params = {
        "id": str(deps.new_id()),
        "pipeline_id": pipeline_id,
        "every_minutes": every,
        "daily_at": daily,
        "anchor_at": now,
        "next_fire_at": next_fire_at(every_minutes=every, daily_at=daily, anchor_at=now, now=now),
        "created_by": principal,
    }
    get_pipeline(cur, pipeline_id)
    row = fetch_one(cur, "insert_schedule", params)
    assert row is not None
    what = {k: params[k] for k in ("pipeline_id", "every_minutes", "daily_at")}
    insert_audit(
        cur,
        principal=principal,
        action="schedule.create",
        entity_type="schedule",
        entity_id=row["id"],
        details=what,
        trace_id=request_id,
    )
    return row


def delete_schedule(
    cur: Cursor, pipeline_id: str, schedule_id: str, principal: str, *, request_id: str
) -> None:
    """Soft-delete a live schedule of `pipeline_id`, with its audit row; `NotFound` if
    unknown or already deleted."""
    params = {"pipeline_id": pipeline_id, "schedule_id": schedule_id}
    if fetch_one(cur, "delete_schedule", params) is None:
        raise NotFound(f"schedule {schedule_id} of pipeline {pipeline_id} not found")
    insert_audit(
        cur,
        principal=principal,
        action="schedule.delete",
        entity_type="schedule",
        entity_id=schedule_id,
        details={"pipeline_id": pipeline_id},
        trace_id=request_id,
    )


class AuditResource(Resource):
    roles = {"GET": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        filters = {name: req.get_param(name) for name in listing.AUDIT_FILTERS}
        with self.deps.db.transaction() as cur:
            page = listing.list_audit(cur, filters=filters, **page_params(req))
        resp.media = listing.page_body(listing.AUDIT_ENTRY, page)
