"""Marshmallow schemas of the cursor marks of incremental table ingest: the `PUT
/pipelines/{id}/cursors/{step}` body and the mark answers (`GET /pipelines/{id}/cursors`)."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields

from service.schemas.responses import UtcDateTime

MAX_CURSOR_VALUE_CHARS = 200
# A mark in the OpenAPI document: a value of the cursor column's type, as text or a number.
_VALUE = {"oneOf": [{"type": "string"}, {"type": "integer"}]}


def _check_value(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValidationError("must be a string or an integer")
    text = str(value)
    if not text or len(text) > MAX_CURSOR_VALUE_CHARS or "\x00" in text:
        raise ValidationError(f"must be 1-{MAX_CURSOR_VALUE_CHARS} characters, without NUL")


class CursorSetSchema(Schema):
    """`{"value": V}`: the next run reads the rows whose cursor is above V (a value of the
    cursor column's type: `"2024-01-31"`, `"2024-01-31 12:00:00+00"`, `42`, `"m"`)."""

    value = fields.Raw(required=True, validate=_check_value, metadata=_VALUE)


class CursorSchema(Schema):
    """One cursor ingest of a pipeline and its mark (`value` null: the next run reads from
    the start). `run_id` is the run that set it, null when an admin did (`updated_by`)."""

    step = fields.String()
    table = fields.String()
    column = fields.String()
    value = fields.String(allow_none=True)
    run_id = fields.String(allow_none=True)
    updated_by = fields.String(allow_none=True)
    updated_at = UtcDateTime(allow_none=True)


class CursorListSchema(Schema):
    """The cursor ingests of a pipeline's current plan (and any step that still has a mark),
    in plan order."""

    cursors = fields.List(fields.Nested(CursorSchema))


CURSOR = CursorSchema()
CURSOR_LIST = CursorListSchema()
