"""The one routes table of the API: every path, the resource serving it and the documentation
of each operation. `service.app.create_app` registers it and `service.api.openapi.spec` documents
it, so a route is described once. A new route is one `Route(...)` line in `ROUTES`.

Path templates use falcon's syntax (`{pipeline_id:uuid}`); the OpenAPI document derives
the path parameters from their converters. Who may call an operation comes from the
resource's own `roles` (or `public`), so 401/403 need not be restated here: a route's
factory is the resource class itself (taking `Deps`), never a lambda hiding them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import falcon

from service.api import resources as r
from service.api.backfills import (
    BackfillCancelResource,
    BackfillResource,
    BackfillsResource,
    RunRerunResource,
)
from service.api.cursors import CursorResource, CursorsResource
from service.api.metrics import METRICS_CONTENT_TYPE, MetricsResource
from service.api.openapi.spec import build_spec
from service.api.preview import PreviewResource
from service.api.tokens import TokenResource, TokenRotateResource, TokensResource
from service.domain.deps import Deps


@dataclass(frozen=True)
class Op:
    """One operation. `response`/`request` name components of `service.api.openapi.spec.SCHEMAS`
    (or the preview's and the plan's JSON schemas); `media` is the success answer's media
    type ("Text" is its component for a text answer). `page`: a list, answering a page of
    `response` items (`{"items", "next"}`) and taking `limit` and `before`. `also` maps
    further statuses it answers (beyond the ones derived from auth, body, path and query
    parameters) to their component (None: no body, "Error": our error body); `query` names
    parameters of `service.api.openapi.spec.QUERY_PARAMETERS`."""

    operation_id: str  # the document's `operationId`: stable, a generated client's name
    summary: str
    status: int = 200
    response: str | None = None
    page: bool = False
    request: str | None = None
    body_required: bool = True
    also: Mapping[int, str | None] = field(default_factory=dict)
    query: tuple[str, ...] = ()
    media: str = "application/json"
    if_match: bool = False  # takes an optional If-Match header (412 when it names another)
    etag: bool = False  # its success answer carries an ETag header
    traceparent: bool = False  # takes a W3C traceparent header (the run joins that trace)
    no_store: bool = False  # its success answer says `Cache-Control: no-store` (a secret)


class Route(NamedTuple):
    """A path template, a factory of its resource (a resource class taking `Deps`), and
    its operations by lower-case HTTP method."""

    path: str
    resource: Callable[[Deps], Any]
    operations: Mapping[str, Op]


API = "/api/v1"
PIPELINE = f"{API}/pipelines/{{pipeline_id:uuid}}"
RUN = f"{API}/runs/{{run_id:uuid}}"


class OpenApiResource:
    """`GET /api/v1/openapi.json`: the OpenAPI document of `ROUTES`, built once."""

    public = True

    def __init__(self, deps: Deps):
        self.spec = build_spec(ROUTES)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self.spec


ROUTES: list[Route] = [
    Route(
        "/health",
        r.HealthResource,
        {
            "get": Op(
                "get_health", "Liveness and database check", response="Health", also={503: "Health"}
            )
        },
    ),
    Route(
        "/metrics",
        MetricsResource,
        {
            "get": Op(
                "get_metrics",
                "Prometheus metrics, read from the database at scrape time"
                " (etl_database_up 0 when it is unavailable)",
                response="Text",
                media=METRICS_CONTENT_TYPE,
            )
        },
    ),
    Route(
        f"{API}/openapi.json",
        OpenApiResource,
        {"get": Op("get_openapi", "This document", response="Document")},
    ),
    Route(
        f"{API}/pipelines",
        r.PipelinesResource,
        {
            "get": Op(
                "list_pipelines",
                "Pipeline summaries, newest first",
                response="PipelineSummary",
                page=True,
                query=("name",),
            ),
            "post": Op(
                "create_pipeline",
                "Create a pipeline (revision 1)",
                201,
                "Pipeline",
                request="PipelineCreate",
                also={409: "Error"},
                etag=True,
            ),
        },
    ),
    Route(
        f"{API}/pipelines/preview",
        PreviewResource,
        {
            "post": Op(
                "preview_plan",
                "Preview a plan, or a saved pipeline's revision, on the first N records of"
                " its ingests; nothing is written (404: no such pipeline or revision)",
                response="Preview",
                request="PreviewRequest",
                also={404: "Error"},
            )
        },
    ),
    Route(
        PIPELINE,
        r.PipelineResource,
        {
            "get": Op(
                "get_pipeline", "A pipeline with its current plan", response="Pipeline", etag=True
            ),
            "patch": Op(
                "update_pipeline",
                "New revision (If-Match: <revision>)",
                response="Pipeline",
                request="PipelinePatch",
                also={412: "Error"},
                if_match=True,
                etag=True,
            ),
            "delete": Op(
                "delete_pipeline",
                "Delete a pipeline (409 pipeline_active while it has queued or running runs):"
                " it answers 404 from then on, its schedules are deleted, its runs stay"
                " readable at /runs/{run_id} and its name is free",
                204,
                also={409: "Error"},
            ),
        },
    ),
    Route(
        f"{PIPELINE}/pause",
        r.PipelinePauseResource,
        {
            "post": Op(
                "pause_pipeline",
                "Pause: no run is admitted (a trigger answers 409 pipeline_paused, a schedule"
                " fire makes no run); runs admitted before go on",
                response="Pipeline",
                request="EmptyBody",
                body_required=False,
            ),
        },
    ),
    Route(
        f"{PIPELINE}/unpause",
        r.PipelineUnpauseResource,
        {
            "post": Op(
                "unpause_pipeline",
                "Unpause: runs are admitted again",
                response="Pipeline",
                request="EmptyBody",
                body_required=False,
            ),
        },
    ),
    Route(
        f"{PIPELINE}/revisions",
        r.RevisionsResource,
        {
            "get": Op(
                "list_revisions",
                "Revision summaries, newest first",
                response="RevisionSummary",
                page=True,
            )
        },
    ),
    Route(
        f"{PIPELINE}/revisions/{{number:int(min=1)}}",
        r.RevisionResource,
        {"get": Op("get_revision", "One revision", response="Revision")},
    ),
    Route(
        f"{PIPELINE}/runs",
        r.PipelineRunsResource,
        {
            "get": Op(
                "list_pipeline_runs",
                "The pipeline's run summaries, newest first",
                response="RunSummary",
                page=True,
                query=("status",),
            ),
            "post": Op(
                "trigger_run",
                "Trigger: 201 new run, 200 the run of a repeated key, 429 skipped, 409 when"
                " the pipeline is paused (pipeline_paused) or its revision no valid plan",
                201,
                "Run",
                request="RunTrigger",
                body_required=False,
                also={200: "Run", 409: "Error", 429: "RunSkipped"},
                traceparent=True,
            ),
        },
    ),
    Route(
        f"{PIPELINE}/schedules",
        r.SchedulesResource,
        {
            "get": Op(
                "list_schedules", "Live schedules, newest first", response="Schedule", page=True
            ),
            "post": Op(
                "create_schedule",
                "Create a UTC schedule (every_minutes 5..1440 or daily_at HH:MM) or a"
                " file-arrival one (watch: a glob under ETL_DATA_DIR)",
                201,
                "Schedule",
                request="ScheduleCreate",
            ),
        },
    ),
    Route(
        f"{PIPELINE}/schedules/{{schedule_id:uuid}}",
        r.ScheduleResource,
        {"delete": Op("delete_schedule", "Delete a schedule", 204)},
    ),
    Route(
        f"{PIPELINE}/webhooks",
        r.WebhooksResource,
        {
            "get": Op(
                "list_webhooks",
                "The pipeline's webhooks, newest first, each with its latest delivery (never"
                " the secret)",
                response="Webhook",
                page=True,
            ),
            "post": Op(
                "create_webhook",
                "Add a webhook: POSTed a signed JSON body when a run ends with one of its"
                " events; the answer shows the secret once (generated when not given);"
                " 409 past 20 webhooks",
                201,
                "WebhookCreated",
                request="WebhookCreate",
                also={409: "Error"},
                no_store=True,
            ),
        },
    ),
    Route(
        f"{PIPELINE}/webhooks/{{webhook_id:uuid}}",
        r.WebhookResource,
        {"delete": Op("delete_webhook", "Delete a webhook (its pending deliveries end)", 204)},
    ),
    Route(
        f"{API}/runs",
        r.RunsResource,
        {
            "get": Op(
                "list_runs",
                "Run summaries of every pipeline, newest first",
                response="RunSummary",
                page=True,
                query=("status", "pipeline_id"),
            )
        },
    ),
    Route(RUN, r.RunResource, {"get": Op("get_run", "A run with every step", response="Run")}),
    Route(
        f"{RUN}/steps/{{step}}/rejects",
        r.StepRejectsResource,
        {
            "get": Op(
                "list_step_rejects",
                "The first rejected rows of a step of a run (line, column, reason)",
                response="StepRejects",
                query=("limit",),
            )
        },
    ),
    Route(
        f"{RUN}/cancel",
        r.RunCancelResource,
        {
            "post": Op(
                "cancel_run",
                "Cancel a queued or running run",
                202,
                "Run",
                request="EmptyBody",
                body_required=False,
                also={409: "Error"},
            ),
        },
    ),
    Route(
        f"{RUN}/resume",
        r.RunResumeResource,
        {
            "post": Op(
                "resume_run",
                "Resume a failed run (429: the queue is full)",
                202,
                "Run",
                request="EmptyBody",
                body_required=False,
                also={409: "Error", 429: "RunSkipped"},
            ),
        },
    ),
    Route(
        f"{API}/tokens",
        TokensResource,
        {
            "get": Op(
                "list_tokens",
                "Tokens, newest first, revoked ones too (never a secret)",
                response="Token",
                page=True,
            ),
            "post": Op(
                "create_token",
                "Create a token: its secret (`token`) is in this answer only",
                201,
                "IssuedToken",
                request="TokenCreate",
                also={409: "Error"},
            ),
        },
    ),
    Route(
        f"{API}/tokens/{{token_id:uuid}}",
        TokenResource,
        {
            "delete": Op(
                "revoke_token",
                "Revoke a token: its API calls and console sessions answer 401 at once"
                " (409 `last_admin`: the last live admin token)",
                204,
                also={409: "Error"},
            )
        },
    ),
    Route(
        f"{API}/tokens/{{token_id:uuid}}/rotate",
        TokenRotateResource,
        {
            "post": Op(
                "rotate_token",
                "A new secret for a token (same id, name and role; shown once): the old"
                " secret and its console sessions answer 401 at once (409: revoked)",
                response="IssuedToken",
                request="TokenRotate",
                body_required=False,
                also={409: "Error"},
            ),
        },
    ),
    Route(
        f"{RUN}/rerun",
        RunRerunResource,
        {
            "post": Op(
                "rerun_run",
                "A new run of the pipeline's current revision with the run's params (429:"
                " the queue is full; 409 params_conflict: the current revision no longer"
                " declares one of the values, or types it otherwise)",
                201,
                "Run",
                request="EmptyBody",
                body_required=False,
                also={400: "Error", 409: "Error", 429: "RunSkipped"},
            ),
        },
    ),
    Route(
        f"{PIPELINE}/backfills",
        BackfillsResource,
        {
            "get": Op(
                "list_backfills", "Backfills, newest first", response="BackfillSummary", page=True
            ),
            "post": Op(
                "create_backfill",
                "One run per value of an int or date parameter from `from` to `to`"
                " (inclusive), or per fire of a schedule (`schedule_id`, each run"
                " processing its interval), admitted in ascending order as the pipeline"
                " has room",
                201,
                "Backfill",
                request="BackfillCreate",
            ),
        },
    ),
    Route(
        f"{PIPELINE}/cursors",
        CursorsResource,
        {
            "get": Op(
                "list_cursors",
                "The cursor ingests and their marks: the highest cursor value the last"
                " succeeded run read (null: the next run reads from the start)",
                response="CursorList",
            ),
            "delete": Op("reset_cursors", "Reset every mark of the pipeline (audited)", 204),
        },
    ),
    Route(
        f"{PIPELINE}/cursors/{{step}}",
        CursorResource,
        {
            "put": Op(
                "set_cursor",
                "Set a step's mark (audited): the next run reads the rows above it",
                response="Cursor",
                request="CursorSet",
            ),
            "delete": Op("reset_cursor", "Reset a step's mark (audited)", 204),
        },
    ),
    Route(
        f"{API}/backfills/{{backfill_id:uuid}}",
        BackfillResource,
        {"get": Op("get_backfill", "A backfill and each value's run", response="Backfill")},
    ),
    Route(
        f"{API}/backfills/{{backfill_id:uuid}}/cancel",
        BackfillCancelResource,
        {
            "post": Op(
                "cancel_backfill",
                "Drop the pending values and cancel the queued and running runs",
                202,
                "Backfill",
                request="EmptyBody",
                body_required=False,
                also={409: "Error"},
            ),
        },
    ),
    Route(
        f"{API}/audit",
        r.AuditResource,
        {
            "get": Op(
                "list_audit",
                "Audit trail, newest first",
                response="Audit",
                page=True,
                query=("entity_id", "entity_type", "action", "principal"),
            ),
        },
    ),
]
