"""The preview answer's JSON schemas in the OpenAPI document (`Preview`, `PreviewStep`), built
from the bounds of `actors.preview` (sample rows, row errors, records)."""

from __future__ import annotations

from typing import Any

from actors.preview import MAX_RECORDS, MAX_ROW_ERRORS, SAMPLE_ROWS
from actors.preview_bounds import MAX_VALUE_CHARS
from actors.preview_exports import COLUMN_TYPES_SCHEMA, PREVIEW_ROWS_SCHEMA
from actors.sources import SOURCE_IMPLS
from actors.targets import TARGET_IMPLS
from dag import StepStatus
from dag import plan as rules
from dag.dialect import DELIMITER_CANDIDATES, ENCODINGS
from service.api.openapi.shapes import always, enum, nullable, ref

_COUNT = {"type": "integer", "minimum": 0}
_TEXT = {"type": "string"}
_PREVIEW_ROWS = PREVIEW_ROWS_SCHEMA
_TRUNCATION_FIELDS = ("value_chars", "sample_rows", "row_errors", "answer_bytes_max")
_COLUMN_TYPES = COLUMN_TYPES_SCHEMA


def _preview_source() -> dict[str, Any]:
    """Where a previewed ingest read, by its source (`actors.sources`): a file, or a sandbox
    table (read-only)."""
    return {"oneOf": [always(source.view_schema) for source in SOURCE_IMPLS.values()]}


def _preview_export() -> dict[str, Any]:
    """What a previewed export would write, by its target (`actors.targets`): a file's
    first lines or a table's first rows."""
    return {"oneOf": [always(target.view_schema) for target in TARGET_IMPLS.values()]}


def preview_components() -> dict[str, dict[str, Any]]:
    """JSON schemas of the preview answer (`actors.preview.PlanPreview.as_dict`)."""
    count, text, column_types, rows = _COUNT, _TEXT, _COLUMN_TYPES, _PREVIEW_ROWS
    row_error = always(
        {
            "line": nullable({"type": "integer", "minimum": 1}),
            "record": nullable({"type": "integer", "minimum": 1}),
            "column": nullable(text),
            "reason": text,
            "raw": {},
        }
    )
    source, export = _preview_source(), _preview_export()
    step = always(
        {
            "name": text,
            "type": enum(rules.STEP_TYPES),
            "status": enum(["ok", StepStatus.FAILED, StepStatus.UPSTREAM_FAILED]),
            "error": nullable(text),
            "columns": nullable(column_types),
            "inferred": {"type": "object", "additionalProperties": text},
            "records_in": count,
            "records_out": count,
            "rejected": count,
            "sample": rows,
            "row_errors": {"type": "array", "maxItems": MAX_ROW_ERRORS, "items": row_error},
            "row_errors_total": count,
            "warnings": {"type": "array", "items": always({"code": text, "message": text})},
            "source": nullable(source),
            "export": nullable(export),
            "dialect": nullable(_preview_dialect()),
        }
    )
    step["description"] = (
        "One step: ok, failed (error says why) or upstream_failed (not run); at most"
        f" {SAMPLE_ROWS} sample records and {MAX_ROW_ERRORS} row errors (row_errors_total"
        " counts them all); source for an ingest, export (what it would write) for an export;"
        " dialect: what a file ingest's input looks written in, when not as declared"
    )
    preview = always(
        {
            "records": {"type": "integer", "minimum": 1, "maximum": MAX_RECORDS},
            "on_row_error": enum(rules.ON_ROW_ERROR_MODES),
            "on_failure": enum(rules.ON_FAILURE_POLICIES),
            "ok": {"type": "boolean"},
            "writes": text,
            "steps": {"type": "array", "items": ref("PreviewStep")},
            "truncated": nullable(always(dict.fromkeys(_TRUNCATION_FIELDS, count))),
        }
    )
    preview["description"] = (
        "Every step of the plan in execution order; nothing is written. Bounded in bytes:"
        f" values longer than {MAX_VALUE_CHARS} characters are cut with a marker giving their"
        " length, and an answer over its byte limit shows fewer sample rows and row errors;"
        " `truncated` says how much was shown (null: everything)"
    )
    return {"Preview": preview, "PreviewStep": step}


def _preview_dialect() -> dict[str, Any]:
    """What a preview proposes for a file ingest (`dag.sniffing`): the detected encoding
    and/or delimiter that differ from the declared ones, and what was declared."""
    shape = {
        "type": "object",
        "properties": {
            "encoding": enum(ENCODINGS),
            "delimiter": enum(DELIMITER_CANDIDATES),
            "declared": {
                "type": "object",
                "properties": {"encoding": {"type": "string"}, "delimiter": {"type": "string"}},
                "required": ["encoding"],
            },
            "message": {"type": "string"},
        },
        "required": ["declared", "message"],
        "minProperties": 3,
    }
    shape["description"] = (
        "the encoding and delimiter detected in the first 64 KiB of the ingest's first file,"
        " given only when they differ from the declared ones (or the defaults utf-8 and ',')"
    )
    return shape
