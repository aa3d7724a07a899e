"""The OpenAPI document of the REST API (`GET /api/v1/openapi.json`): apispec renders the
marshmallow schemas, `build_spec` documents every operation of a routes table (see
`service.api.routes`), and the plan and the preview answer are typed by JSON schemas built from
the rules of `dag.plan` and `actors.preview`.

Each operation lists every status it can answer: its success status(es), 401 and 403 from
the resource's roles, 400/411/413/415 for a body, 404 for path parameters, 400 for query
parameters, 503 when the database is down, and what the route adds (409, 412, 429 ...).
A list operation (`Op(page=True)`) answers a page envelope `{"items", "next"}` of its
summary component and takes `limit` and `before` (`service.domain.listing`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from actors.preview import MAX_RECORDS
from dag import RunStatus, StepStatus
from service.api.openapi.checks import check_components
from service.api.openapi.plan import plan_components
from service.api.openapi.preview import preview_components
from service.api.openapi.shapes import NO_NUL, closed, enum, ref
from service.domain import listing
from service.domain.principals import ADMIN, READ
from service.errors import HTTP_ERRORS
from service.schemas import backfills, cursors, requests, responses


class Operation(Protocol):
    """What `build_spec` reads of an operation (`service.api.routes.Op`)."""

    summary: str
    status: int
    response: str | None
    page: bool
    request: str | None
    body_required: bool
    also: Mapping[int, str | None]
    query: tuple[str, ...]
    media: str
    operation_id: str
    if_match: bool
    etag: bool
    traceparent: bool
    no_store: bool


class DocumentedRoute(Protocol):
    """What `build_spec` reads of a route (`service.api.routes.Route`)."""

    @property
    def path(self) -> str: ...
    @property
    def resource(self) -> Any: ...
    @property
    def operations(self) -> Mapping[str, Operation]: ...


SCHEMAS = {
    "ErrorDetail": responses.ErrorDetailSchema,
    "ErrorInfo": responses.ErrorSchema,
    "Error": responses.ErrorBodySchema,
    "PipelineCreate": requests.PipelineCreateSchema,
    "PipelinePatch": requests.PipelinePatchSchema,
    "RunTrigger": requests.RunTriggerSchema,
    "ScheduleCreate": requests.ScheduleCreateSchema,
    "WebhookCreate": requests.WebhookCreateSchema,
    "EmptyBody": requests.EmptyBodySchema,
    "Pipeline": responses.PipelineSchema,
    "Revision": responses.RevisionSchema,
    "Attempt": responses.AttemptSchema,
    "Step": responses.StepSchema,
    "Run": responses.RunSchema,
    "RejectRow": responses.RejectRowSchema,
    "StepRejects": responses.StepRejectsSchema,
    "RunSkipped": responses.RunSkippedSchema,
    "Schedule": responses.ScheduleSchema,
    "WebhookDelivery": responses.WebhookDeliverySchema,
    "Webhook": responses.WebhookSchema,
    "WebhookCreated": responses.WebhookCreatedSchema,
    "Audit": responses.AuditSchema,
    "Health": responses.HealthSchema,
    "LastRun": responses.LastRunSchema,
    "PipelineSummary": responses.PipelineSummarySchema,
    "RevisionSummary": responses.RevisionSummarySchema,
    "RunSummary": responses.RunSummarySchema,
    "PreviewRequest": requests.PreviewRequestSchema,
    "TokenCreate": requests.TokenCreateSchema,
    "TokenRotate": requests.TokenRotateSchema,
    "Token": responses.TokenSchema,
    "IssuedToken": responses.IssuedTokenSchema,
    "BackfillCreate": backfills.BackfillCreateSchema,
    "BackfillRun": backfills.BackfillRunSchema,
    "Backfill": backfills.BackfillSchema,
    "BackfillSummary": backfills.BackfillSummarySchema,
    "CursorSet": cursors.CursorSetSchema,
    "Cursor": cursors.CursorSchema,
    "CursorList": cursors.CursorListSchema,
}
# The items of each list (`Op.page`): `<name>Page` components are built from them.
PAGE_ITEMS = (
    "PipelineSummary", "RevisionSummary", "RunSummary", "Schedule", "Webhook", "Audit", "Token",
    "BackfillSummary",
)  # fmt: skip


_UUID = requests.UUID_TEXT.pattern
_CURSOR = rf"^{listing.CURSOR_TEXT.pattern}$"
# One run status or several, comma-separated; blanks and spaces around them are ignored
# (`service.domain.listing.parse_statuses`).
_STATUS = "(?:{})".format("|".join(RunStatus))
_STATUSES = rf"^(?:[ \t]*,)*[ \t]*{_STATUS}[ \t]*(?:,[ \t]*(?:{_STATUS}[ \t]*)?)*$"


def _exact(description: str) -> dict[str, Any]:
    return {"description": description, "schema": {"type": "string", "pattern": NO_NUL}}


QUERY_PARAMETERS: dict[str, dict[str, Any]] = {
    "limit": {
        "description": f"page size (at most {listing.MAX_LIMIT})",
        "schema": {
            "type": "integer",
            "minimum": 1,
            "maximum": listing.MAX_LIMIT,
            "default": listing.DEFAULT_LIMIT,
        },
    },
    "before": {
        "description": "the `next` of the previous page (an opaque cursor of this list)",
        "schema": {"type": "string", "pattern": _CURSOR},
    },
    "name": _exact("only the pipeline of this exact name"),
    "status": {
        "description": "only runs of this status, or of these comma-separated statuses"
        f" ({', '.join(RunStatus)})",
        "schema": {"type": "string", "pattern": _STATUSES},
    },
    "pipeline_id": {
        "description": "only runs of this pipeline",
        "schema": {"type": "string", "format": "uuid", "pattern": f"^{_UUID}$"},
    },
    "entity_id": _exact("only entries about the entity of this id"),
    "entity_type": _exact("only entries about entities of this type (pipeline, run, ...)"),
    "action": _exact("only entries of this action (pipeline.create, run.trigger, ...)"),
    "principal": _exact("only entries by this principal"),
}

_CONVERTERS = {
    "uuid": {"type": "string", "format": "uuid"},
    "int": {"type": "integer", "minimum": 1},
}
_FIELD = re.compile(r"\{(\w+)(?::(\w+)(?:\([^)]*\))?)?\}")


def openapi_path(template: str) -> tuple[str, list[dict[str, Any]]]:
    """A falcon path template as an OpenAPI path and its path parameters."""
    parameters = []
    for name, converter in _FIELD.findall(template):
        schema = _CONVERTERS.get(converter, {"type": "string"})
        parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
    return _FIELD.sub(r"{\1}", template), parameters


def build_spec(routes: Iterable[DocumentedRoute]) -> dict[str, Any]:
    """The OpenAPI 3 document of `routes` as a JSON-able dict."""
    spec = APISpec(
        title="ETL pipeline platform",
        version="1",
        openapi_version="3.1.0",
        plugins=[MarshmallowPlugin()],
    )
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
    for name, schema in SCHEMAS.items():
        spec.components.schema(name, schema=schema)
    for route in routes:
        path, parameters = openapi_path(route.path)
        operations = {
            method: _operation(route.resource, method, op, parameters)
            for method, op in route.operations.items()
        }
        spec.path(path=path, operations=operations)
    doc = spec.to_dict()
    _refine_components(doc["components"]["schemas"])
    return doc


# PATCH /pipelines/{id}: the revision the change is made against (`service.domain.pipelines`).
IF_MATCH = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": 'The revision the change is made against: `"3"`, `3`, `W/"3"` or `*`;'
    " 412 when it is not the current one",
    "schema": {"type": "string"},  # any text: one that names no revision is a 412
}
ETAG = {"description": 'The current revision, quoted (`"3"`)', "schema": {"type": "string"}}
# POST /pipelines/{id}/runs: the caller's W3C trace context (docs/tracing.md). Any text is
# taken: a malformed one is ignored, as W3C asks, and the run starts a trace of its own.
TRACEPARENT = {
    "name": "traceparent",
    "in": "header",
    "required": False,
    "description": "W3C trace context (`00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`):"
    " the new run gets that trace id and its spans join the trace; a malformed value is"
    " ignored",
    "schema": {"type": "string"},
}
# Every answer that is a run carries the run's trace context: its trace id and the span its
# spans hang off (the trigger's).
TRACEPARENT_HEADER = {
    "description": "The run's W3C trace context: its trace id and its trigger span's id",
    "schema": {"type": "string", "pattern": "^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$"},
}
_RUN_ANSWERS = ("Run", "RunSkipped")
# An answer that shows a secret once: no cache on the way may keep it.
NO_STORE = {
    "description": "`no-store`: the answer shows a secret, no cache may keep it",
    "required": True,
    "schema": {"type": "string", "const": "no-store"},
}
_SECRET_ANSWERS = ("IssuedToken",)


def _operation(resource: Any, method: str, op: Operation, parameters: list) -> dict[str, Any]:
    public = getattr(resource, "public", False)
    roles = getattr(resource, "roles", {}).get(method.upper(), READ)
    who = "anyone" if public else ", ".join(sorted(r.removeprefix("pipeline_") for r in roles))
    success = f"{op.response}Page" if op.page else op.response
    answers: dict[int, str | None] = {op.status: success, **op.also}
    if not public:
        answers.update({401: "Error", 503: "Error"})
        if set(roles) != set(READ):
            answers[403] = "Error"
    if op.request:
        answers.update({400: "Error", 411: "Error", 413: "Error", 415: "Error"})
    if parameters:
        answers[404] = "Error"
    names = op.query + (("limit", "before") if op.page else ())
    if names:
        answers[400] = "Error"
    out: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": f"{op.summary} [{who}]",
        "responses": {},
    }
    if not public:
        out["security"] = [{"bearer": []}]
    query = [{"name": q, "in": "query", **QUERY_PARAMETERS[q]} for q in names]
    headers = ([IF_MATCH] if op.if_match else []) + ([TRACEPARENT] if op.traceparent else [])
    if parameters or query or headers:
        out["parameters"] = parameters + query + headers
    if op.request:
        content = {"application/json": {"schema": ref(op.request)}}
        out["requestBody"] = {"required": op.body_required, "content": content}
    for status in sorted(answers):
        component = answers[status]
        text = op.summary if status < 300 else HTTP_ERRORS.get(status, ("", "error"))[1]
        answer: dict[str, Any] = {"description": text}
        if component:
            media = op.media if status == op.status else "application/json"
            answer["content"] = {media: {"schema": ref(component)}}
        if op.etag and status < 300:
            answer["headers"] = {"ETag": ETAG}
        if op.no_store and status < 300:
            answer.setdefault("headers", {})["Cache-Control"] = NO_STORE
        if component in _RUN_ANSWERS:
            answer.setdefault("headers", {})["traceparent"] = TRACEPARENT_HEADER
        if component in _SECRET_ANSWERS and status < 300:
            answer.setdefault("headers", {})["Cache-Control"] = NO_STORE
        out["responses"][str(status)] = answer
    return out


def _page(item: str) -> dict[str, Any]:
    """The envelope of a list: up to `MAX_LIMIT` items, the cursor of the next page."""
    return {
        "description": f"One page of {item} items, newest first; `next` is null on the last",
        **closed(
            {
                "items": {"type": "array", "maxItems": listing.MAX_LIMIT, "items": ref(item)},
                "next": {"type": ["string", "null"], "pattern": _CURSOR},
            },
            ["items", "next"],
        ),
    }


def _refine_components(components: dict[str, Any]) -> None:
    """What marshmallow cannot say: the plan's shape, exactly one of three schedule kinds,
    strings without NUL, and an error shape whose fields are always there."""
    components.update(plan_components())
    components.update(check_components())
    components["Step"]["properties"]["checks"] = {"type": "array", "items": ref("CheckResult")}
    for name in ("PipelineCreate", "PipelinePatch"):
        components[name]["properties"]["plan"] = ref("Plan")
    for name in ("Pipeline", "Revision"):
        components[name]["properties"]["plan"] = ref("Plan")
    components["PipelineCreate"]["properties"]["name"]["pattern"] = NO_NUL
    token_name = components["TokenCreate"]["properties"]["name"]
    token_name.update(pattern=NO_NUL, **{"not": {"const": ADMIN}})  # `etl seed`'s name
    components["RunTrigger"]["properties"]["trigger_key"]["pattern"] = NO_NUL
    _refine_backfills(components)
    components["CursorSet"]["properties"]["value"] = {
        "type": ["integer", "string"],
        "minLength": 1,
        "maxLength": cursors.MAX_CURSOR_VALUE_CHARS,
        "pattern": NO_NUL,
        "description": "a value of the cursor column's type, in its PostgreSQL text form",
    }
    every, daily, watch = (
        components["ScheduleCreate"]["properties"][k]
        for k in ("every_minutes", "daily_at", "watch")
    )
    daily["pattern"] = daily["pattern"].replace(r"\Z", "$")  # JSON schema regexes know no \Z
    watch.update(
        pattern=NO_NUL,
        description="a glob relative to ETL_DATA_DIR (no '..', not absolute); each settled"
        " new file makes one run with params.file = its path; the plan must declare a"
        " string parameter file",
    )
    catchup = components["ScheduleCreate"]["properties"]["catchup"]
    catchup["description"] = (
        "after downtime: latest (default: one run, for the latest missed fire) or all (every"
        " missed interval, through a backfill)"
    )
    components["ScheduleCreate"] = {
        "description": "exactly one of every_minutes (5..1440), daily_at (HH:MM, UTC) or"
        " watch (a glob under ETL_DATA_DIR)",
        "oneOf": [
            closed({"every_minutes": every, "catchup": catchup}, ["every_minutes"]),
            closed({"daily_at": daily, "catchup": catchup}, ["daily_at"]),
            closed({"watch": watch}, ["watch"]),
        ],
    }
    for name in ("ErrorDetail", "ErrorInfo", "Error"):
        components[name]["required"] = list(components[name]["properties"])
    _refine_webhooks(components)
    _refine_lists(components)
    _refine_preview_request(components)
    components.update(preview_components())


def _refine_backfills(components: dict[str, Any]) -> None:
    """A backfill ranges over an int or date parameter, or over a schedule's fire times."""
    given = components["BackfillCreate"]["properties"]
    end = {
        "type": ["integer", "string"],
        "pattern": NO_NUL,
        "description": "an int parameter's integer or a date parameter's YYYY-MM-DD",
    }
    fire = {
        "type": "string",
        "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$",
        "description": "a fire time of the schedule, ISO 8601 UTC to the second",
    }
    components["BackfillCreate"] = {
        "description": "one run per value of an int or date parameter from `from` to `to`"
        " (inclusive), or per fire of a schedule from `from` to `to` (each run processing"
        " the interval its fire closes)",
        "oneOf": [
            closed({"param": given["param"], "from": end, "to": end}, ["param", "from", "to"]),
            closed(
                {"schedule_id": given["schedule_id"], "from": fire, "to": fire},
                ["schedule_id", "from", "to"],
            ),
        ],
    }


def _refine_lists(components: dict[str, Any]) -> None:
    """Page envelopes; every field of a list item is always there; statuses are enums."""
    for name in ("LastRun", *PAGE_ITEMS):
        components[name]["required"] = list(components[name]["properties"])
    for name in ("LastRun", "RunSummary"):
        components[name]["properties"]["status"]["enum"] = [str(s) for s in RunStatus]
    counts = components["RunSummary"]["properties"]["step_counts"]
    counts["propertyNames"] = enum(StepStatus)
    counts["additionalProperties"] = {"type": "integer", "minimum": 1}
    for name in PAGE_ITEMS:
        components[f"{name}Page"] = _page(name)


def _refine_webhooks(components: dict[str, Any]) -> None:
    """The URL pattern in JSON schema's dialect, secrets without NUL, always-there fields."""
    create = components["WebhookCreate"]["properties"]
    create["url"]["pattern"] = create["url"]["pattern"].replace(r"\Z", "$")
    create["secret"]["pattern"] = NO_NUL
    for name in ("WebhookDelivery", "WebhookCreated"):
        components[name]["required"] = list(components[name]["properties"])


def _refine_preview_request(components: dict[str, Any]) -> None:
    """Exactly one of a plan (with its name riding along) or a saved pipeline."""
    fields = components["PreviewRequest"]["properties"]
    records = fields["records"]
    name = {**fields["name"], "pattern": NO_NUL}
    pipeline_id = {**fields["pipeline_id"], "format": "uuid", "pattern": f"^{_UUID}$"}
    components["PreviewRequest"] = {
        "description": "exactly one of plan (a name may ride along) or pipeline_id (revision:"
        f" default the current one); records: 1..{MAX_RECORDS} per ingest",
        "oneOf": [
            closed({"plan": ref("Plan"), "name": name, "records": records}, ["plan"]),
            closed(
                {"pipeline_id": pipeline_id, "revision": fields["revision"], "records": records},
                ["pipeline_id"],
            ),
        ],
    }
