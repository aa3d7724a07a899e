"""Marshmallow schemas of the REST API's request bodies (load, unknown fields rejected), shared
by the API and the console so that a form field and a JSON field go through one validator,
plus the conversions around them: raw body -> loaded request (`load_body`, `check_plan` for
plans) and marshmallow errors -> error `details` with dotted field paths."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from itertools import accumulate
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from actors.preview import DEFAULT_RECORDS, MAX_RECORDS
from dag.plan import validate_plan
from service.errors import InvalidPlan, MalformedJson, UnsupportedMediaType, ValidationFailed

MAX_BODY_BYTES = 1024 * 1024  # of a request body (a console form with a plan too)
# The roles a token may have (admin, operator, viewer): `service.domain.principals` names them
# from here, and says what each may do.
ROLE_NAMES = ("pipeline_admin", "pipeline_operator", "pipeline_viewer")
TOKEN_MAX_LIFETIME_S = 10 * 366 * 86400  # `expires_in_s`: at most about ten years
TRIGGER_KEY_MAX = 200
# A plan nests about 6 levels deep; far deeper JSON is an attack on the recursive decoder
# and validators (RecursionError), refused before it is decoded.
MAX_JSON_DEPTH = 32
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")
HH_MM = r"^([01][0-9]|2[0-3]):[0-5][0-9]\Z"
UUID_TEXT = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)  # \Z: "$" would let "02:30\n" through


# --- requests --------------------------------------------------------------------------------


class PipelineCreateSchema(Schema):
    """`POST /pipelines`: a name and a plan (the plan itself is checked by `dag`)."""

    name = fields.String(required=True, validate=validate.Length(min=1, max=200))
    plan = fields.Raw(required=True)


class PipelinePatchSchema(Schema):
    """`PATCH /pipelines/{id}`: a new plan, which becomes the next revision."""

    plan = fields.Raw(required=True)


class RunTriggerSchema(Schema):
    """`POST /pipelines/{id}/runs`: an optional idempotency key and parameter values (typed
    against the plan's declarations by `dag.params` at admission)."""

    trigger_key = fields.String(validate=validate.Length(min=1, max=TRIGGER_KEY_MAX))
    params = fields.Dict(keys=fields.String(), values=fields.Raw(allow_none=True))


class EmptyBodySchema(Schema):
    """Cancel and resume take no fields; an unknown one is a 400 naming it."""


class ScheduleCreateSchema(Schema):
    """`POST /pipelines/{id}/schedules`: exactly one of `every_minutes` or `daily_at` (UTC),
    or `watch`, a glob relative to `ETL_DATA_DIR` whose arriving files each make a run (the
    glob's shape and the plan's `file` parameter are checked by `service.domain.watches`)."""

    every_minutes = fields.Integer(strict=True, validate=validate.Range(min=5, max=1440))
    daily_at = fields.String(
        validate=validate.Regexp(HH_MM, error="must be HH:MM between 00:00 and 23:59 (UTC)")
    )
    watch = fields.String(validate=validate.Length(min=1, max=1024))
    # after downtime: one run for the latest missed fire (default), or every missed interval
    catchup = fields.String(validate=validate.OneOf(["latest", "all"]))

    @validates_schema
    def validate_one_kind(self, data: Mapping[str, Any], **kwargs: Any) -> None:
        given = [k for k in ("every_minutes", "daily_at", "watch") if k in data]
        if len(given) > 1:
            raise ValidationError(
                "give one of every_minutes, daily_at or watch, not several", given[-1]
            )
        if not given:
            raise ValidationError(
                "give every_minutes (5..1440), daily_at (HH:MM UTC) or watch (a glob under"
                " the data directory)",
                "every_minutes",
            )


WEBHOOK_EVENTS = ("run.failed", "run.succeeded", "run.skipped")
WEBHOOK_URL_MAX = 2048
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_PORT = r"(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_H16 = "[0-9A-Fa-f]{1,4}"


def _ipv6_address() -> str:
    """RFC 3986's `IPv6address`, one form per number of 16-bit groups written before `::`
    (none: eight groups, the last two perhaps an IPv4 address), as a regular expression."""
    ls32 = rf"(?:{_H16}:{_H16}|{_OCTET}(?:\.{_OCTET}){{3}})"
    after = [rf"(?:{_H16}:){{{5 - n}}}{ls32}" for n in range(6)] + [_H16, ""]
    forms = [rf"(?:{_H16}:){{6}}{ls32}"]
    for n, tail in enumerate(after):  # at most n groups before the "::"
        head = rf"(?:(?:{_H16}:){{0,{n - 1}}}{_H16})?" if n else ""
        forms.append(f"{head}::{tail}")
    return "(?:" + "|".join(forms) + ")"


# http(s), a host name, an IPv4 address or a bracketed IPv6 address (loopback included; no
# zone), an optional port 1..65535, then a path and query of printable ASCII: no
# user:password@ (it would show in every listing), no white space. The OpenAPI document
# states the same pattern.
_HOST = rf"(?:{_LABEL}(?:\.{_LABEL})*\.?|\[{_ipv6_address()}\])"
WEBHOOK_URL = rf"^https?://{_HOST}(?::{_PORT})?(?:[/?][!-~]*)?\Z"


class WebhookCreateSchema(Schema):
    """`POST /pipelines/{id}/webhooks`: where to POST, for which run events, and optionally
    the HMAC secret (generated when left out)."""

    url = fields.String(
        required=True,
        validate=[
            validate.Length(max=WEBHOOK_URL_MAX),
            validate.Regexp(
                WEBHOOK_URL,
                error="must be an http:// or https:// URL with a host name, an IPv4 address or"
                " a bracketed IPv6 address, an optional port 1..65535 and printable ASCII"
                " after it (no user:password@, no spaces)",
            ),
        ],
    )
    events = fields.List(
        fields.String(validate=validate.OneOf(WEBHOOK_EVENTS)),
        required=True,
        validate=validate.Length(min=1, max=len(WEBHOOK_EVENTS) * 4),
    )
    secret = fields.String(validate=validate.Length(min=16, max=256))


def _expires_in_s() -> fields.Integer:
    return fields.Integer(
        strict=True,
        validate=validate.Range(min=1, max=TOKEN_MAX_LIFETIME_S),
        metadata={"description": "lifetime in seconds from now (absent: the token never expires)"},
    )


class TokenCreateSchema(Schema):
    """`POST /tokens`: a name (unique among live tokens), a role, an optional lifetime."""

    name = fields.String(required=True, validate=validate.Length(min=1, max=200))
    role = fields.String(required=True, validate=validate.OneOf(ROLE_NAMES))
    expires_in_s = _expires_in_s()


class TokenRotateSchema(Schema):
    """`POST /tokens/{id}/rotate`: optionally a new lifetime (else the expiry stays)."""

    expires_in_s = _expires_in_s()


# --- responses -------------------------------------------------------------------------------


class PreviewRequestSchema(Schema):
    """`{"plan"}` (a `name` may ride along, as in `POST /pipelines`) or `{"pipeline_id",
    "revision"?}` (default: the current revision), plus `records` (1..MAX_RECORDS)."""

    name = fields.String()
    plan = fields.Raw()
    pipeline_id = fields.String(
        validate=validate.Regexp(
            rf"{UUID_TEXT.pattern}\Z", error="must be a UUID (8-4-4-4-12 hex digits)"
        )
    )
    revision = fields.Integer(strict=True, validate=validate.Range(min=1))
    records = fields.Integer(
        strict=True, validate=validate.Range(min=1, max=MAX_RECORDS), load_default=DEFAULT_RECORDS
    )

    @validates_schema
    def validate_one_source(self, data: Mapping[str, Any], **kwargs: Any) -> None:
        if ("plan" in data) == ("pipeline_id" in data):
            raise ValidationError("give either plan or pipeline_id", "plan")
        if "revision" in data and "pipeline_id" not in data:
            raise ValidationError("revision needs pipeline_id", "revision")
        if "name" in data and "plan" not in data:
            raise ValidationError("name rides along with a plan only", "name")


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
        return load_fields({}, schema)
    media = (content_type or "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise UnsupportedMediaType(f"send application/json, not {media or 'no type'}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedJson(f"the body is not valid JSON: {exc}") from exc
    return load_fields(decode_json(text), schema, what="request body")


def decode_json(text: str, what: str = "body") -> Any:
    """JSON `text` decoded, or `MalformedJson` naming `what`: nesting deeper than
    `MAX_JSON_DEPTH` is refused before decoding, NaN and Infinity are not JSON, an integral
    number with a fraction or exponent becomes an int."""
    if json_depth(text) > MAX_JSON_DEPTH:
        raise MalformedJson(f"the {what} nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_parse_number)
    except (ValueError, RecursionError) as exc:
        raise MalformedJson(f"the {what} is not valid JSON: {exc}") from exc


def load_fields(data: Any, schema: Schema, what: str = "request body") -> dict[str, Any]:
    """Decoded fields (a JSON body's, or a console form's) loaded through `schema`: a
    string PostgreSQL cannot store (NUL, a lone surrogate) or a schema error -> 400
    `ValidationFailed` with field paths. The API and the console both load through this."""
    details = unstorable_strings(data)
    if details:
        raise ValidationFailed(f"the {what} is invalid", details=details)
    try:
        return schema.load(data)
    except ValidationError as exc:
        details = field_errors(exc.messages)
        raise ValidationFailed(f"the {what} is invalid", details=details) from exc


def form_integer(text: str) -> int | str:
    """A form field meant as an integer: its int when it is plain ASCII digits (at most 18,
    within int64), else the text itself, which an integer field of a schema then refuses
    with its own message (`²`, a 5,000-digit number, `12abc`)."""
    text = text.strip()
    if text.isascii() and text.isdigit() and len(text) <= 18:
        return int(text)
    return text


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
