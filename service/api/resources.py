"""Falcon resources of the REST API (docs/rest.md): thin faces over `service.domain`. Each
declares the roles allowed per HTTP method (enforced by `service.api.auth.AuthMiddleware`),
reads its body through `read_json` (413, 415, 400 in that order), calls the domain in one
transaction, dumps with `service.schemas.responses` and wakes the dag-advancer after COMMIT.
Run answers carry the run's trace id as `X-Trace-Id` and its W3C `traceparent` (the trigger
span's, `service.tracing`); a trigger runs in that span, a child of the caller's `traceparent`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import falcon

from actors import param_attributes
from service.api.bodies import page_params, read_json
from service.domain import listing, pipelines, schedules, webhooks
from service.domain.audit import audit_change
from service.domain.db import Cursor, check_database
from service.domain.deps import Deps, wake
from service.domain.principals import ADMIN_ONLY, OPERATE, READ
from service.domain.rejects import step_rejects
from service.domain.runs import (
    SKIP_MESSAGES,
    Admission,
    AdmissionOutcome,
    Cancellation,
    admit_run,
    cancel_run,
    get_run_view,
    resume_run,
    run_views,
)
from service.schemas import requests, responses
from service.tracing import TRACEPARENT, TRACESTATE, RunTrace, trigger_span

log = logging.getLogger(__name__)


def answer_run(resp: falcon.Response, status: int, view: dict, extra: dict | None = None) -> None:
    """Answer with one run (plus `extra` top-level fields), its `X-Trace-Id` and its
    `traceparent`."""
    resp.status = status
    resp.media = {**responses.RUN.dump(view), **(extra or {})}
    resp.set_header("X-Trace-Id", view["trace_id"])
    run_trace = RunTrace.of_run(view)
    if run_trace is not None:
        resp.set_header(TRACEPARENT, run_trace.traceparent)


T = TypeVar("T")


class Resource:
    """Base of the API's resources: the dependencies, the audit row of a change, and the
    advancer's wake-up after COMMIT. Subclasses declare `roles` per HTTP method."""

    def __init__(self, deps: Deps):
        self.deps = deps

    def audit(self, cur: Cursor, req: falcon.Request, action: str, entity: str, **kw: Any) -> None:
        """An audit row for `action` on `entity` ("type:id") by the caller."""
        principal = req.context.principal.name
        audit_change(cur, principal, action, entity, req.context.request_id, **kw)

    def wake(self, run: dict) -> None:
        """Wake the dag-advancer for `run` (see `service.domain.deps.wake`)."""
        wake(self.deps, run)

    def read_no_body(self, req: falcon.Request) -> None:
        """An action's request carries no body, or an empty JSON object (else 400)."""
        read_json(req, requests.EmptyBodySchema(), optional=True)

    def change(self, req: falcon.Request, action: Callable[..., T], *args: Any, **kw: Any) -> T:
        """The domain's `action(cur, *args, principal, request_id=..., **kw)` in one
        transaction, as the caller (a pipeline's pause, the create and delete of its
        schedules and webhooks, a backfill's cancel)."""
        with self.deps.db.transaction() as cur:
            principal = req.context.principal.name
            return action(cur, *args, principal, request_id=req.context.request_id, **kw)

    def pipeline_page(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        pipeline_id: Any,
        lister: Callable,
        schema: Any,
    ) -> None:
        """A page of a pipeline's things: `lister(cur, pipeline_id=..., limit=, before=)` of
        `service.domain.listing` dumped with `schema`; 404 for an unknown pipeline."""
        with self.deps.db.transaction() as cur:
            pipelines.get_pipeline(cur, str(pipeline_id))
            page = lister(cur, pipeline_id=str(pipeline_id), **page_params(req))
        resp.media = listing.page_body(schema, page)


class HealthResource(Resource):
    public = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            with self.deps.db.transaction() as cur:
                problem = check_database(cur)
        except Exception as exc:
            log.warning("health check: database unavailable: %s", exc)
            resp.status = 503
            resp.media = {"status": "error", "database": "unavailable"}
            return
        if problem is not None:
            resp.status = 503
            resp.media = {"status": "error", "database": problem}
            return
        resp.media = {"status": "ok", "database": "ok"}


class PipelinesResource(Resource):
    roles = {"GET": READ, "POST": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        name = req.get_param("name")
        with self.deps.db.transaction() as cur:
            page = listing.list_pipelines(cur, name=name, **page_params(req))
        resp.media = listing.page_body(responses.PIPELINE_SUMMARY, page)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req, requests.PipelineCreateSchema())
        pipeline_id, who = str(self.deps.new_id()), req.context.principal.name
        with self.deps.db.transaction() as cur:
            row = pipelines.create_pipeline(
                cur, pipeline_id, body["name"], body["plan"], who, request_id=req.context.request_id
            )
        resp.status = 201
        resp.location = f"{req.path}/{pipeline_id}"
        resp.etag = f'"{row["revision"]}"'
        resp.media = responses.PIPELINE.dump(row)


class PipelineResource(Resource):
    roles = {"GET": READ, "PATCH": ADMIN_ONLY, "DELETE": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with self.deps.db.transaction() as cur:
            row = pipelines.get_pipeline(cur, str(pipeline_id))
        resp.etag = f'"{row["revision"]}"'
        resp.media = responses.PIPELINE.dump(row)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        body = read_json(req, requests.PipelinePatchSchema())
        with self.deps.db.transaction() as cur:
            row = pipelines.update_plan(
                cur,
                str(pipeline_id),
                body["plan"],
                req.context.principal.name,
                if_match=req.get_header("If-Match"),
                request_id=req.context.request_id,
            )
        resp.etag = f'"{row["revision"]}"'
        resp.media = responses.PIPELINE.dump(row)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with self.deps.db.transaction() as cur:
            pipelines.delete_pipeline(
                cur,
                str(pipeline_id),
                req.context.principal.name,
                request_id=req.context.request_id,
            )
        resp.status = 204


class _PauseAction(Resource):
    """POST /pipelines/{id}/pause and /unpause: one path, only `paused` differs."""

    roles = {"POST": ADMIN_ONLY}
    paused: bool

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        self.read_no_body(req)
        row = self.change(req, pipelines.set_paused, str(pipeline_id), self.paused)
        resp.media = responses.PIPELINE.dump(row)


class PipelinePauseResource(_PauseAction):
    paused = True


class PipelineUnpauseResource(_PauseAction):
    paused = False


class RevisionsResource(Resource):
    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with self.deps.db.transaction() as cur:
            pipelines.get_pipeline(cur, str(pipeline_id))
            page = listing.list_revisions(cur, pipeline_id=str(pipeline_id), **page_params(req))
        resp.media = listing.page_body(responses.REVISION_SUMMARY, page)


class RevisionResource(Resource):
    roles = {"GET": READ}

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any, number: int
    ) -> None:
        with self.deps.db.transaction() as cur:
            row = pipelines.get_revision(cur, str(pipeline_id), number)
        resp.media = responses.REVISION.dump(row)


class PipelineRunsResource(Resource):
    roles = {"GET": READ, "POST": OPERATE}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        params = page_params(req)
        status = req.get_param("status")
        with self.deps.db.transaction() as cur:
            pipelines.get_pipeline(cur, str(pipeline_id))
            page = listing.list_runs(cur, status=status, pipeline_id=str(pipeline_id), **params)
        resp.media = listing.page_body(responses.RUN_SUMMARY, page)

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        body = read_json(req, requests.RunTriggerSchema(), optional=True)
        key = body.get("trigger_key") or f"manual:{self.deps.new_id()}"
        with trigger_span(
            self.deps.tracer,
            "trigger_run",
            traceparent=req.get_header(TRACEPARENT),
            tracestate=req.get_header(TRACESTATE),
            attributes={"http.request.method": "POST", "http.route": _TRIGGER_ROUTE},
        ) as trigger:
            with self.deps.db.transaction() as cur:
                admission = admit_run(
                    cur,
                    str(pipeline_id),
                    key,
                    req.context.principal.name,
                    params=body.get("params"),
                    new_id=self.deps.new_id,
                    request_id=req.context.request_id,
                    trace=trigger.run_trace,
                )
                (view,) = run_views(cur, [admission.run])
            trigger.span.set_attributes(
                {
                    "etl.pipeline_id": str(pipeline_id),
                    "etl.run_id": str(admission.run["id"]),
                    "etl.admission": str(admission.outcome),
                    "http.response.status_code": _TRIGGER_STATUS[admission.outcome],
                    **param_attributes(admission.run.get("params")),
                }
            )
        if admission.needs_wake:
            self.wake(admission.run)
        status = _TRIGGER_STATUS[admission.outcome]
        skipped = admission.outcome == AdmissionOutcome.SKIPPED
        extra = {"error": _refusal(admission)} if skipped else None
        answer_run(resp, status, view, extra)


_TRIGGER_ROUTE = "/api/v1/pipelines/{pipeline_id}/runs"
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
        resp.media = listing.page_body(responses.RUN_SUMMARY, page)


class RunResource(Resource):
    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response, run_id: Any) -> None:
        with self.deps.db.transaction() as cur:
            view = get_run_view(cur, str(run_id))
        answer_run(resp, 200, view)


class StepRejectsResource(Resource):
    """`GET /runs/{id}/steps/{step}/rejects?limit=`: the first rejected rows of a step
    (line, column, reason; `etl runs show --rejects`), at most `limit` (default 50)."""

    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response, run_id: Any, step: str) -> None:
        limit = listing.parse_limit(req.get_param("limit"))
        with self.deps.db.transaction() as cur:
            found = step_rejects(cur, self.deps.config.reject_dir, str(run_id), step, limit=limit)
        resp.media = responses.STEP_REJECTS.dump(found)


class _RunAction(Resource):
    """POST /runs/{id}/cancel and /runs/{id}/resume: one path, only `act` differs. A change
    answers 202; a resume the limits refuse answers 429 with the run (it stays failed)."""

    roles = {"POST": OPERATE}
    act: Callable[..., Admission | Cancellation]

    def on_post(self, req: falcon.Request, resp: falcon.Response, run_id: Any) -> None:
        self.read_no_body(req)
        with self.deps.db.transaction() as cur:
            change = self.act(
                cur, str(run_id), req.context.principal.name, request_id=req.context.request_id
            )
            (view,) = run_views(cur, [change.run])
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


class _PipelineThings(Resource):
    """A pipeline's schedules or webhooks: a page of them (GET) and a new one (POST, 201
    with its location); the subclass names the domain's functions and the schemas."""

    lister: Callable[..., Any]
    summary: Any  # the schema of a listed one
    body: type  # the request schema of a new one
    create: Callable[..., dict]
    created: Any  # the schema of the 201 answer
    new_thing: Callable[[], dict[str, Any]]  # the id (and clock) `create` takes besides the body

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        self.pipeline_page(req, resp, pipeline_id, self.lister, self.summary)

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        body = read_json(req, self.body())
        row = self.change(req, self.create, str(pipeline_id), body, **self.new_thing())
        resp.status = 201
        resp.location = f"{req.path}/{row['id']}"
        resp.media = self.created.dump(row)


class _PipelineThing(Resource):
    """One of a pipeline's schedules or webhooks: DELETE, 204."""

    roles = {"DELETE": ADMIN_ONLY}
    remove: Callable[..., None]

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any, **thing_id: Any
    ) -> None:
        (one,) = thing_id.values()  # the route names it: schedule_id, webhook_id
        self.change(req, self.remove, str(pipeline_id), str(one))
        resp.status = 204


class SchedulesResource(_PipelineThings):
    roles = {"GET": READ, "POST": ADMIN_ONLY}
    lister = staticmethod(listing.list_schedules)
    summary = responses.SCHEDULE_SUMMARY
    body = requests.ScheduleCreateSchema
    create = staticmethod(schedules.create_schedule)
    created = responses.SCHEDULE

    def new_thing(self) -> dict[str, Any]:
        return {"schedule_id": str(self.deps.new_id()), "now": self.deps.now()}


class ScheduleResource(_PipelineThing):
    remove = staticmethod(schedules.delete_schedule)


class WebhooksResource(_PipelineThings):
    """A pipeline's webhooks: admins only. The 201 answer carries the secret, hence
    `Cache-Control: no-store`: no cache on the way keeps it."""

    roles = {"GET": ADMIN_ONLY, "POST": ADMIN_ONLY}
    lister = staticmethod(listing.list_webhooks)
    summary = responses.WEBHOOK_SUMMARY
    body = requests.WebhookCreateSchema
    create = staticmethod(webhooks.create_webhook)
    created = responses.WEBHOOK_CREATED

    def new_thing(self) -> dict[str, Any]:
        return {"webhook_id": str(self.deps.new_id())}

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        super().on_post(req, resp, pipeline_id)
        resp.cache_control = ["no-store"]


class WebhookResource(_PipelineThing):
    remove = staticmethod(webhooks.delete_webhook)


class AuditResource(Resource):
    roles = {"GET": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        filters = {name: req.get_param(name) for name in listing.AUDIT_FILTERS}
        with self.deps.db.transaction() as cur:
            page = listing.list_audit(cur, filters=filters, **page_params(req))
        resp.media = listing.page_body(responses.AUDIT_ENTRY, page)
