"""The OpenAPI document of the REST API (`GET /api/v1/openapi.json`): apispec renders the
marshmallow schemas, `build_spec` documents every operation of a routes table (see
`service.routes`), and the plan and the preview answer are typed by JSON schemas built from
the rules of `dag.plan` and `actors.preview`.

Each operation lists every status it can answer: its success status(es), 401 and 403 from
the resource's roles, 400/411/413/415 for a body, 404 for path parameters, 400 for query
parameters, 503 when the database is down, and what the route adds (409, 412, 429 ...).
A list operation (`Op(page=True)`) answers a page envelope `{"items", "next"}` of its
summary component and takes `limit` and `before` (`service.listing`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from actors.preview import MAX_RECORDS, MAX_ROW_ERRORS, SAMPLE_ROWS
from dag import RunStatus, StepStatus
from dag import plan as rules
from dag.paths import MAX_PATH_BYTES
from service import listing, schemas
from service.auth import READ
from service.preview_api import PreviewRequestSchema

if TYPE_CHECKING:
    from service.deps import Deps

SCHEMAS = {
    "ErrorDetail": schemas.ErrorDetailSchema,
    "ErrorInfo": schemas.ErrorSchema,
    "Error": schemas.ErrorBodySchema,
    "PipelineCreate": schemas.PipelineCreateSchema,
    "PipelinePatch": schemas.PipelinePatchSchema,
    "RunTrigger": schemas.RunTriggerSchema,
    "ScheduleCreate": schemas.ScheduleCreateSchema,
    "EmptyBody": schemas.EmptyBodySchema,
    "Pipeline": schemas.PipelineSchema,
    "Revision": schemas.RevisionSchema,
    "Attempt": schemas.AttemptSchema,
    "Step": schemas.StepSchema,
    "Run": schemas.RunSchema,
    "RunSkipped": schemas.RunSkippedSchema,
    "Schedule": schemas.ScheduleSchema,
    "Audit": schemas.AuditSchema,
    "Health": schemas.HealthSchema,
    "LastRun": listing.LastRunSchema,
    "PipelineSummary": listing.PipelineSummarySchema,
    "RevisionSummary": listing.RevisionSummarySchema,
    "RunSummary": listing.RunSummarySchema,
    "PreviewRequest": PreviewRequestSchema,
}
# The items of each list (`Op.page`): `<name>Page` components are built from them.
PAGE_ITEMS = ("PipelineSummary", "RevisionSummary", "RunSummary", "Schedule", "Audit")


@dataclass(frozen=True)
class Op:
    """One operation. `response`/`request` name components of `service.openapi.SCHEMAS`
    (or the preview's and the plan's JSON schemas); `media` is the success answer's media
    type ("Text" is its component for a text answer). `page`: a list, answering a page of
    `response` items (`{"items", "next"}`) and taking `limit` and `before`. `also` maps
    further statuses it answers (beyond the ones derived from auth, body, path and query
    parameters) to their component (None: no body, "Error": our error body); `query` names
    parameters of `service.openapi.QUERY_PARAMETERS`."""

    summary: str
    status: int = 200
    response: str | None = None
    page: bool = False
    request: str | None = None
    body_required: bool = True
    also: Mapping[int, str | None] = field(default_factory=dict)
    query: tuple[str, ...] = ()
    media: str = "application/json"


class Route(NamedTuple):
    """A path template, a factory of its resource (a resource class taking `Deps`), and
    its operations by lower-case HTTP method."""

    path: str
    resource: Callable[[Deps], Any]
    operations: Mapping[str, Op]


_NO_NUL = r"^[^\u0000]*$"
_UUID = listing.UUID_TEXT.pattern
_CURSOR = rf"^{listing.CURSOR_TEXT.pattern}$"
# One run status or several, comma-separated; blanks and spaces around them are ignored
# (`service.listing.parse_statuses`).
_STATUS = "(?:{})".format("|".join(RunStatus))
_STATUSES = rf"^(?:[ \t]*,)*[ \t]*{_STATUS}[ \t]*(?:,[ \t]*(?:{_STATUS}[ \t]*)?)*$"


def _exact(description: str) -> dict[str, Any]:
    return {"description": description, "schema": {"type": "string", "pattern": _NO_NUL}}


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
_STATUS_TEXT = {
    400: "invalid request (field paths in details)",
    401: "no or unknown bearer token",
    403: "the role may not make this call",
    404: "no such resource",
    409: "conflicts with the current state",
    411: "a chunked body this server cannot read",
    412: "If-Match names another revision",
    413: "body over 1 MiB",
    415: "body not application/json",
    429: "refused by the admission limits",
    503: "the database is unavailable",
}


def openapi_path(template: str) -> tuple[str, list[dict[str, Any]]]:
    """A falcon path template as an OpenAPI path and its path parameters."""
    parameters = []
    for name, converter in _FIELD.findall(template):
        schema = _CONVERTERS.get(converter, {"type": "string"})
        parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
    return _FIELD.sub(r"{\1}", template), parameters


def build_spec(routes: Iterable[Route]) -> dict[str, Any]:
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


def _operation(resource: Any, method: str, op: Op, parameters: list) -> dict[str, Any]:
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
    out: dict[str, Any] = {"summary": f"{op.summary} [{who}]", "responses": {}}
    if not public:
        out["security"] = [{"bearer": []}]
    query = [{"name": q, "in": "query", **QUERY_PARAMETERS[q]} for q in names]
    if parameters or query:
        out["parameters"] = parameters + query
    if op.request:
        content = {"application/json": {"schema": _ref(op.request)}}
        out["requestBody"] = {"required": op.body_required, "content": content}
    for status in sorted(answers):
        component = answers[status]
        text = op.summary if status < 300 else _STATUS_TEXT.get(status, "error")
        answer: dict[str, Any] = {"description": text}
        if component:
            media = op.media if status == op.status else "application/json"
            answer["content"] = {media: {"schema": _ref(component)}}
        out["responses"][str(status)] = answer
    return out


def _ref(name: str) -> dict[str, Any]:
    if name == "Document":
        return {"type": "object"}
    if name == "Text":
        return {"type": "string"}
    return {"$ref": f"#/components/schemas/{name}"}


def _page(item: str) -> dict[str, Any]:
    """The envelope of a list: up to `MAX_LIMIT` items, the cursor of the next page."""
    return {
        "description": f"One page of {item} items, newest first; `next` is null on the last",
        **_closed(
            {
                "items": {"type": "array", "maxItems": listing.MAX_LIMIT, "items": _ref(item)},
                "next": {"type": ["string", "null"], "pattern": _CURSOR},
            },
            ["items", "next"],
        ),
    }


def _refine_components(components: dict[str, Any]) -> None:
    """What marshmallow cannot say: the plan's shape, exactly one of two schedule kinds,
    strings without NUL, and an error shape whose fields are always there."""
    components.update(plan_components())
    for name in ("PipelineCreate", "PipelinePatch"):
        components[name]["properties"]["plan"] = _ref("Plan")
    for name in ("Pipeline", "Revision"):
        components[name]["properties"]["plan"] = _ref("Plan")
    components["PipelineCreate"]["properties"]["name"]["pattern"] = _NO_NUL
    components["RunTrigger"]["properties"]["trigger_key"]["pattern"] = _NO_NUL
    every, daily = (
        components["ScheduleCreate"]["properties"][k] for k in ("every_minutes", "daily_at")
    )
    daily["pattern"] = daily["pattern"].replace(r"\Z", "$")  # JSON schema regexes know no \Z
    components["ScheduleCreate"] = {
        "description": "exactly one of every_minutes (5..1440) or daily_at (HH:MM, UTC)",
        "oneOf": [
            _closed({"every_minutes": every}, ["every_minutes"]),
            _closed({"daily_at": daily}, ["daily_at"]),
        ],
    }
    for name in ("ErrorDetail", "ErrorInfo", "Error"):
        components[name]["required"] = list(components[name]["properties"])
    _refine_lists(components)
    _refine_preview_request(components)
    components.update(preview_components())


def _refine_lists(components: dict[str, Any]) -> None:
    """Page envelopes; every field of a list item is always there; statuses are enums."""
    for name in ("LastRun", *PAGE_ITEMS):
        components[name]["required"] = list(components[name]["properties"])
    for name in ("LastRun", "RunSummary"):
        components[name]["properties"]["status"]["enum"] = [str(s) for s in RunStatus]
    counts = components["RunSummary"]["properties"]["step_counts"]
    counts["propertyNames"] = _enum(StepStatus)
    counts["additionalProperties"] = {"type": "integer", "minimum": 1}
    for name in PAGE_ITEMS:
        components[f"{name}Page"] = _page(name)


def _refine_preview_request(components: dict[str, Any]) -> None:
    """Exactly one of a plan (with its name riding along) or a saved pipeline."""
    fields = components["PreviewRequest"]["properties"]
    records = fields["records"]
    name = {**fields["name"], "pattern": _NO_NUL}
    pipeline_id = {**fields["pipeline_id"], "format": "uuid", "pattern": f"^{_UUID}$"}
    components["PreviewRequest"] = {
        "description": "exactly one of plan (a name may ride along) or pipeline_id (revision:"
        f" default the current one); records: 1..{MAX_RECORDS} per ingest",
        "oneOf": [
            _closed({"plan": _ref("Plan"), "name": name, "records": records}, ["plan"]),
            _closed(
                {"pipeline_id": pipeline_id, "revision": fields["revision"], "records": records},
                ["pipeline_id"],
            ),
        ],
    }


# --- the plan ------------------------------------------------------------------------------

_TEXT = {"type": "string", "pattern": _NO_NUL}
_NAME = {"type": "string", "minLength": 1, "pattern": _NO_NUL}
_LITERAL = {
    "oneOf": [
        _TEXT,
        {"type": "integer", "minimum": rules.INT64_MIN, "maximum": rules.INT64_MAX},
        {"type": "null"},
    ]
}
# Relative, no `..` segment, no NUL, not naming a folder; names of at most 255 characters
# (the byte limit of `dag.plan` is exact for ASCII).
_SEGMENT = r"[^/\\\u0000]{1,255}"
_REL_PATH = {
    "type": "string",
    "maxLength": MAX_PATH_BYTES,
    "pattern": (
        r"^(?![/\\])(?![A-Za-z]:)(?!(.*[/\\])?\.\.([/\\]|$))"
        rf"([^/\\\u0000]{{0,255}}[/\\])*(?!\.$){_SEGMENT}$"
    ),
}


def _closed(properties: Mapping[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": required,
        "additionalProperties": False,
    }


def _enum(values: Iterable[str]) -> dict[str, Any]:
    return {"type": "string", "enum": [str(v) for v in values]}


def plan_components() -> dict[str, dict[str, Any]]:
    """JSON schemas of a plan (`Plan`, its steps and configs) from the rules of `dag.plan`.
    What a schema cannot say (dependencies name existing steps, no cycles,
    unique names, distinct export paths) `dag` still checks: a 400 with field paths."""
    step_name = {"type": "string", "pattern": f"^{rules.STEP_NAME_RE.pattern}$"}
    retry = _closed(
        {"max_attempts": {"type": "integer", "minimum": 1, "maximum": rules.MAX_ATTEMPTS}}, []
    )
    configs = {
        "ingest": _ingest_config(),
        "transform": {"oneOf": list(_transform_ops().values())},
        "export": _export_config(),
    }
    steps = {}
    for kind in rules.STEP_TYPES:
        depends_on = {"type": "array", "uniqueItems": True, "items": step_name}
        depends_on.update({"maxItems": 0} if kind == "ingest" else {"minItems": 1})
        steps[f"{kind.capitalize()}Step"] = _closed(
            {
                "name": step_name,
                "type": _enum([kind]),
                "config": configs[kind],
                "depends_on": depends_on,
                "retry": retry,
            },
            ["name", "type", "config"],
        )
    plan = _closed(
        {
            "on_failure": _enum(rules.ON_FAILURE_POLICIES),
            "on_row_error": _enum(rules.ON_ROW_ERROR_MODES),
            "steps": {
                "type": "array",
                "minItems": rules.MIN_STEPS,
                "maxItems": rules.MAX_STEPS,
                "items": {"oneOf": [_ref(name) for name in steps]},
            },
        },
        ["steps"],
    )
    plan["description"] = (
        "A DAG of steps (docs/plan-format.md). Beyond this schema the API checks that dependencies"
        " name other steps of the plan, without cycles, that step names are unique and that"
        " file exports do not write the same path or under one another (400)."
    )
    return {"Plan": plan, **steps}


def _ingest_config() -> dict[str, Any]:
    """A file ingest (a delimiter only with the csv format, the default) or a table's."""
    columns = {
        "type": "object",
        "propertyNames": {"minLength": 1, "pattern": _NO_NUL},
        "additionalProperties": _enum(rules.COLUMN_TYPES),
    }
    delimiter = {"type": "string", "minLength": 1, "maxLength": 1, "not": _enum(['"', "\r", "\n"])}
    file_ingest = _closed(
        {
            "source": _enum(["file"]),
            "path": _REL_PATH,
            "format": _enum(rules.INGEST_FORMATS),
            "columns": columns,
            "delimiter": delimiter,
        },
        ["source", "path"],
    )
    file_ingest["anyOf"] = [
        {"properties": {"format": _enum(["csv"])}},
        {"not": {"required": ["delimiter"]}},
    ]
    table_ingest = _closed({"source": _enum(["table"]), "table": _NAME}, ["source", "table"])
    return {"oneOf": [file_ingest, table_ingest]}


def _transform_ops() -> dict[str, dict[str, Any]]:
    """Each transform op's config, by op."""
    names = {"type": "array", "minItems": 1, "uniqueItems": True, "items": _NAME}
    mapping = {
        "type": "object",
        "propertyNames": {"pattern": _NO_NUL},
        "additionalProperties": _LITERAL,
    }
    group_by = {
        "type": "array",
        "uniqueItems": True,
        "items": {**_NAME, "not": _enum(rules.AGGREGATE_OUTPUTS)},
    }
    ops = {
        "trim": ({"columns": names}, ["columns"]),
        "normalize_whitespace": ({"columns": names}, ["columns"]),
        "map": (
            {"column": _NAME, "mapping": mapping, "into": _NAME, "default": _LITERAL},
            ["column", "mapping"],
        ),
        "filter_eq": ({"column": _NAME, "value": _LITERAL}, ["column", "value"]),
        "parse_date": ({"column": _NAME}, ["column"]),
        "aggregate": ({"column": _NAME, "group_by": group_by}, ["column"]),
    }
    return {
        op: _closed({"op": _enum([op]), **ops[op][0]}, ["op", *ops[op][1]])
        for op in rules.TRANSFORM_OPS
    }


def _export_config() -> dict[str, Any]:
    """A file export or a sandbox table export."""
    table = {"type": "string", "pattern": f"^{rules.EXPORT_TABLE_RE.pattern}$"}
    file_export = _closed(
        {"target": _enum(["file"]), "path": _REL_PATH, "format": _enum(rules.EXPORT_FORMATS)},
        ["target", "path"],
    )
    table_export = _closed(
        {"target": _enum(["table"]), "table": table, "key": _NAME}, ["target", "table"]
    )
    return {"oneOf": [file_export, table_export]}


# --- the preview answer ----------------------------------------------------------------------


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _fields(properties: Mapping[str, Any]) -> dict[str, Any]:
    """An object whose `properties` are always there (extra fields may be added later)."""
    return {"type": "object", "properties": dict(properties), "required": list(properties)}


_TEXT = {"type": "string"}
_PREVIEW_VALUE = {"type": ["integer", "string", "null"]}
_PREVIEW_ROWS = {
    "type": "array",
    "maxItems": SAMPLE_ROWS,
    "items": {"type": "object", "additionalProperties": _PREVIEW_VALUE},
}
_COLUMN_TYPES = {"type": "object", "additionalProperties": _enum(rules.COLUMN_TYPES)}


def _preview_source() -> dict[str, Any]:
    """Where a previewed ingest read: a file, or a sandbox table (read-only)."""
    file = {"source": _enum(["file"]), "path": _TEXT, "format": _enum(rules.INGEST_FORMATS)}
    table = {"source": _enum(["table"]), "table": _TEXT, "read_only": {"const": True}}
    return {"oneOf": [_fields(file), _fields({**table, "note": _TEXT})]}


def _preview_export() -> dict[str, Any]:
    """What a previewed export would write: a file's first lines or a table's first rows."""
    file = {
        "target": _enum(["file"]),
        "path": _TEXT,
        "format": _enum(rules.EXPORT_FORMATS),
        "columns": _COLUMN_TYPES,
        "rows": _PREVIEW_ROWS,
        "text": _TEXT,
    }
    table = {
        "target": _enum(["table"]),
        "table": _TEXT,
        "key": _nullable(_TEXT),
        "columns": {"type": "object", "additionalProperties": _TEXT},
        "rows": _PREVIEW_ROWS,
        "note": _TEXT,
    }
    return {"oneOf": [_fields(file), _fields(table)]}


def preview_components() -> dict[str, dict[str, Any]]:
    """JSON schemas of the preview answer (`actors.preview.PlanPreview.as_dict`)."""
    count, text, column_types, rows = (
        {"type": "integer", "minimum": 0},
        _TEXT,
        _COLUMN_TYPES,
        _PREVIEW_ROWS,
    )
    row_error = _fields(
        {
            "line": _nullable({"type": "integer", "minimum": 1}),
            "record": _nullable({"type": "integer", "minimum": 1}),
            "column": _nullable(text),
            "reason": text,
            "raw": {},
        }
    )
    source, export = _preview_source(), _preview_export()
    step = _fields(
        {
            "name": text,
            "type": _enum(rules.STEP_TYPES),
            "status": _enum(["ok", StepStatus.FAILED, StepStatus.UPSTREAM_FAILED]),
            "error": _nullable(text),
            "columns": _nullable(column_types),
            "inferred": {"type": "object", "additionalProperties": text},
            "records_in": count,
            "records_out": count,
            "rejected": count,
            "sample": rows,
            "row_errors": {"type": "array", "maxItems": MAX_ROW_ERRORS, "items": row_error},
            "row_errors_total": count,
            "warnings": {"type": "array", "items": _fields({"code": text, "message": text})},
            "source": _nullable(source),
            "export": _nullable(export),
        }
    )
    step["description"] = (
        "One step: ok, failed (error says why) or upstream_failed (not run); at most"
        f" {SAMPLE_ROWS} sample records and {MAX_ROW_ERRORS} row errors (row_errors_total"
        " counts them all); source for an ingest, export (what it would write) for an export"
    )
    preview = _fields(
        {
            "records": {"type": "integer", "minimum": 1, "maximum": MAX_RECORDS},
            "on_row_error": _enum(rules.ON_ROW_ERROR_MODES),
            "on_failure": _enum(rules.ON_FAILURE_POLICIES),
            "ok": {"type": "boolean"},
            "writes": text,
            "steps": {"type": "array", "items": _ref("PreviewStep")},
        }
    )
    preview["description"] = "Every step of the plan in execution order; nothing is written"
    return {"Preview": preview, "PreviewStep": step}
