"""Marshmallow schemas of the REST API: request bodies (load, unknown fields rejected) and
responses (dump; also the source of the OpenAPI document), plus the conversions around them:
raw body -> loaded request (`load_body`, `check_plan` for plans), marshmallow errors -> error
`details` with dotted field paths, and database rows -> the run shape the README documents."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC
from decimal import Decimal
from itertools import accumulate
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from dag import RunStatus, StepStatus
from dag.plan import validate_plan
from service.errors import InvalidPlan, MalformedJson, UnsupportedMediaType, ValidationFailed

TRIGGER_KEY_MAX = 200
# A plan nests about 6 levels deep; far deeper JSON is an attack on the recursive decoder
# and validators (RecursionError), refused before it is decoded.
MAX_JSON_DEPTH = 32
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")
HH_MM = r"^([01][0-9]|2[0-3]):[0-5][0-9]\Z"  # \Z: "$" would let "02:30\n" through


class UtcDateTime(fields.DateTime):
    """An aware datetime dumped as ISO-8601 UTC with microseconds and a `Z`."""

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        if value is None:
            return None
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- requests --------------------------------------------------------------------------------


class PipelineCreateSchema(Schema):
    """`POST /pipelines`: a name and a plan (the plan itself is checked by `dag`)."""

    name = fields.String(required=True, validate=validate.Length(min=1, max=200))
    plan = fields.Raw(required=True)


class PipelinePatchSchema(Schema):
    """`PATCH /pipelines/{id}`: a new plan, which becomes the next revision."""

    plan = fields.Raw(required=True)


class RunTriggerSchema(Schema):
    """`POST /pipelines/{id}/runs`: an optional idempotency key."""

    trigger_key = fields.String(validate=validate.Length(min=1, max=TRIGGER_KEY_MAX))


class EmptyBodySchema(Schema):
    """Cancel and resume take no fields; an unknown one is a 400 naming it."""


class ScheduleCreateSchema(Schema):
    """`POST /pipelines/{id}/schedules`: exactly one of `every_minutes` or `daily_at` (UTC)."""

    every_minutes = fields.Integer(strict=True, validate=validate.Range(min=5, max=1440))
    daily_at = fields.String(
        validate=validate.Regexp(HH_MM, error="must be HH:MM between 00:00 and 23:59 (UTC)")
    )

    @validates_schema
    def validate_one_kind(self, data: Mapping[str, Any], **kwargs: Any) -> None:
        has_every, has_daily = "every_minutes" in data, "daily_at" in data
        if has_every and has_daily:
            raise ValidationError("give either every_minutes or daily_at, not both", "daily_at")
        if not has_every and not has_daily:
            raise ValidationError(
                "give every_minutes (5..1440) or daily_at (HH:MM UTC)", "every_minutes"
            )


# --- responses -------------------------------------------------------------------------------


class ErrorDetailSchema(Schema):
    field = fields.String()
    message = fields.String()


class ErrorSchema(Schema):
    code = fields.String()
    message = fields.String()
    details = fields.List(fields.Nested(ErrorDetailSchema))


class ErrorBodySchema(Schema):
    """Every 4xx/5xx answer."""

    error = fields.Nested(ErrorSchema)


class HealthSchema(Schema):
    status = fields.String()
    database = fields.String()


class PipelineSchema(Schema):
    """A pipeline with its current revision number and plan."""

    id = fields.String()
    name = fields.String()
    revision = fields.Integer()
    plan = fields.Raw()
    created_at = UtcDateTime()
    updated_at = UtcDateTime()


class RevisionSchema(Schema):
    """An immutable plan snapshot."""

    pipeline_id = fields.String()
    revision = fields.Integer(attribute="number")
    plan = fields.Raw()
    created_by = fields.String()
    created_at = UtcDateTime()


class AttemptSchema(Schema):
    number = fields.Integer()
    executor = fields.String(allow_none=True)
    started_at = UtcDateTime(allow_none=True)
    finished_at = UtcDateTime(allow_none=True)
    outcome = fields.String(allow_none=True)
    error = fields.String(allow_none=True)
    # The step whose attempt this one ran inside (stage fusion), else null.
    fused_into = fields.String(allow_none=True)


class StepSchema(Schema):
    """One step of a run: state, attempts, counters, output column types, digests."""

    name = fields.String()
    type = fields.String()
    status = fields.String()
    attempts = fields.List(fields.Nested(AttemptSchema))
    records_in = fields.Integer()
    records_out = fields.Integer()
    rejected = fields.Integer()
    columns = fields.Dict(keys=fields.String(), values=fields.String())
    input_digest = fields.String(allow_none=True)
    output_digest = fields.String(allow_none=True)
    checkpoint = fields.Raw(allow_none=True)
    error = fields.String(allow_none=True)
    batches = fields.Integer()
    row_errors = fields.List(fields.Raw())
    started_at = UtcDateTime(allow_none=True)
    finished_at = UtcDateTime(allow_none=True)


class RunSchema(Schema):
    """A run with every step (the 429 answer of a skipped trigger has the same fields)."""

    id = fields.String()
    pipeline_id = fields.String()
    revision = fields.Integer()
    status = fields.String()
    reason = fields.String(allow_none=True)
    trigger_key = fields.String()
    trace_id = fields.String()
    created_at = UtcDateTime()
    started_at = UtcDateTime(allow_none=True)
    finished_at = UtcDateTime(allow_none=True)
    purged_at = UtcDateTime(allow_none=True)  # intermediate outputs purged (retention)
    queue_position = fields.Integer(allow_none=True)
    cancel_requested = fields.Boolean()
    created_by = fields.String()
    error = fields.String(allow_none=True)
    steps = fields.List(fields.Nested(StepSchema))


class RunSkippedSchema(RunSchema):
    """A refused trigger or resume (429): the run's fields, `status`/`reason` saying why,
    and `error` as the error object."""

    error = fields.Nested(ErrorSchema)


class ScheduleSchema(Schema):
    id = fields.String()
    pipeline_id = fields.String()
    every_minutes = fields.Integer(allow_none=True)
    daily_at = fields.String(allow_none=True)
    anchor_at = UtcDateTime()
    next_fire_at = UtcDateTime()
    last_fired_at = UtcDateTime(allow_none=True)
    last_run_id = fields.String(allow_none=True)
    created_at = UtcDateTime()


class AuditSchema(Schema):
    id = fields.Integer()
    principal = fields.String()
    action = fields.String()
    entity_type = fields.String()
    entity_id = fields.String()
    details = fields.Raw()
    trace_id = fields.String(allow_none=True)
    created_at = UtcDateTime()


# --- conversions -----------------------------------------------------------------------------


def field_errors(messages: Any, path: str = "") -> list[dict[str, str]]:
    """Marshmallow's `ValidationError.messages` as `details`: `{"field", "message"}` with
    dotted paths (`a.b`, list items as `a[2]`); schema-level messages go to `body`."""
    out: list[dict[str, str]] = []
    if isinstance(messages, Mapping):
        for key, value in messages.items():
            if key == "_schema":
                sub = path or "body"
            elif isinstance(key, int):
                sub = f"{path}[{key}]"
            else:
                sub = f"{path}.{key}" if path else str(key)
            out.extend(field_errors(value, sub))
    elif isinstance(messages, list | tuple):
        for item in messages:
            if isinstance(item, Mapping | list | tuple):
                out.extend(field_errors(item, path))
            else:
                out.append({"field": path or "body", "message": str(item)})
    else:
        out.append({"field": path or "body", "message": str(messages)})
    return out


def load_body(
    raw: bytes, content_type: str | None, schema: Schema, *, optional: bool = False
) -> dict[str, Any]:
    """A request body loaded through `schema`: a non-JSON content type -> 415
    (`UnsupportedMediaType`), bad JSON -> 400 `MalformedJson`, schema errors -> 400
    `ValidationFailed` with field details. An empty body counts as `{}` when `optional`."""
    if not raw.strip():
        if not optional:
            details = [{"field": "body", "message": "is required"}]
            raise ValidationFailed("a JSON body is required", details=details)
        data: Any = {}
    else:
        media = (content_type or "").split(";")[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            raise UnsupportedMediaType(f"send application/json, not {media or 'no type'}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedJson(f"the body is not valid JSON: {exc}") from exc
        if json_depth(text) > MAX_JSON_DEPTH:
            raise MalformedJson(f"the body nests deeper than {MAX_JSON_DEPTH} levels")
        try:
            data = json.loads(text, parse_constant=_reject_constant, parse_float=_parse_number)
        except ValueError as exc:
            raise MalformedJson(f"the body is not valid JSON: {exc}") from exc
        if "\\u" in text:  # NUL and lone surrogates only arrive as escapes
            details = unstorable_strings(data)
            if details:
                raise ValidationFailed("the request body is invalid", details=details)
    try:
        return schema.load(data)
    except ValidationError as exc:
        details = field_errors(exc.messages)
        raise ValidationFailed("the request body is invalid", details=details) from exc


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON `text` (0 for a scalar), found
    without decoding it; brackets inside strings do not count. Only meaningful for valid
    JSON, which is all the decoder accepts afterwards."""
    if "[" not in text and "{" not in text:
        return 0
    brackets = _JSON_BRACKET.findall(_JSON_STRING.sub("", text))
    steps = (1 if b in "[{" else -1 for b in brackets)
    return max(accumulate(steps, initial=0))


def unstorable_strings(data: Any) -> list[dict[str, str]]:
    """`details` for every string (key or value) PostgreSQL text and jsonb cannot hold: a
    NUL character or a lone UTF-16 surrogate (`"\\ud800"`), each with its field path."""
    details = []
    for path, text in _strings(data):
        if "\x00" in text:
            details.append({"field": path, "message": "NUL characters (\\u0000) are not allowed"})
        elif not _encodable(text):
            message = "lone surrogate escapes (\\ud800-\\udfff) are not allowed"
            details.append({"field": path, "message": message})
    return details


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _strings(data: Any) -> Iterator[tuple[str, str]]:
    """Every string in decoded JSON with its dotted path (`a.b[2]`; keys by their own
    path), iteratively: the depth is bounded, but recursion is not needed."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            yield path or "body", value
        elif isinstance(value, dict):
            items = []
            for key, item in value.items():
                shown = key.encode("utf-8", "backslashreplace").decode("utf-8")
                sub = f"{path}.{shown}" if path else shown
                yield sub, key
                items.append((sub, item))
            stack.extend(reversed(items))
        elif isinstance(value, list):
            stack.extend(reversed([(f"{path}[{i}]", item) for i, item in enumerate(value)]))


def _parse_number(text: str) -> int | float:
    """A JSON number with a fraction or exponent: an int when its value is integral (JSON
    knows one number type, and JSON schema calls `60.0` an integer), else a float."""
    value = Decimal(text)
    # beyond int64 it stays a float: `1e999999999` must not become a billion-digit int
    if value.is_finite() and value.adjusted() <= 19 and value == value.to_integral_value():
        return int(value)
    return float(text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_plan(plan: Any) -> None:
    """Raise `InvalidPlan` with every `dag` validation error (paths start with `plan.`)."""
    errors = validate_plan(plan)
    if errors:
        details = [{"field": e.field, "message": e.message} for e in errors]
        raise InvalidPlan(f"the plan has {len(errors)} error(s)", details=details)


def step_view(row: Mapping[str, Any], attempts: list[Mapping[str, Any]]) -> dict[str, Any]:
    """A `step_runs` row and its attempts as the API step; `columns` [[name, type], ...]
    becomes an ordered object."""
    view = dict(row)
    view["columns"] = {name: typ for name, typ in (row.get("columns") or [])}
    view["attempts"] = [dict(a) for a in attempts]
    return view


# The status of the steps of a run that never started: a queued run's steps are pending, a
# canceled one's canceled, a skipped one's never run.
_UNSTARTED_STEP_STATUS = {
    RunStatus.CANCELED: StepStatus.CANCELED,
    RunStatus.SKIPPED: StepStatus.NOT_RUN,
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
        plan_steps = (plan or {}).get("steps", [])
        steps = [pending_step_view(s, run["status"]) for s in plan_steps]
    failed = next((s for s in steps if s["status"] == StepStatus.FAILED), None)
    view = dict(run)
    view["steps"] = steps
    view["error"] = f"step {failed['name']}: {failed['error']}" if failed else None
    return view
