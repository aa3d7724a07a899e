"""`file`: an ingest of a file (or of every file a glob matches) under the data directory, in
the `csv` (the default), `json` or `jsonl` format; columns declared or inferred, null
markers (`null_values`), and a csv file's dialect (`delimiter`, `quote`, `encoding`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dag.dialect import DIALECT_KEYS, ENCODINGS, SCHEMA_CHANGES, validate_dialect
from dag.errors import FieldError
from dag.fieldchecks import check_choice, check_path_key, is_list, quoted
from dag.ops.schema import NO_NUL, closed, one_of
from dag.paths import REL_PATH_SCHEMA
from dag.sources.source import Config, IngestSource
from dag.types import COLUMN_TYPES

INGEST_FORMATS = ("csv", "json", "jsonl")
MAX_NULL_VALUES = 32
MAX_NULL_VALUE_CHARS = 64


def _validate(config: Config, path: str, errors: list[FieldError]) -> None:
    check_path_key(config, path, errors)
    fmt = config.get("format", "csv")
    format_ok = check_choice(fmt, INGEST_FORMATS, f"{path}.format", errors)
    if "columns" in config:
        _validate_columns(config["columns"], f"{path}.columns", errors)
    if "null_values" in config:
        _validate_null_values(config["null_values"], f"{path}.null_values", errors)
    if format_ok:
        validate_dialect(config, path, errors)
    if "delimiter" in config:
        delimiter = config["delimiter"]
        if format_ok and fmt != "csv":
            errors.append(FieldError(f"{path}.delimiter", "only applies to the csv format"))
        elif not isinstance(delimiter, str) or len(delimiter) != 1:
            errors.append(FieldError(f"{path}.delimiter", "must be a single character"))
        elif delimiter in ('"', "\r", "\n"):
            errors.append(
                FieldError(f"{path}.delimiter", "cannot be a quote, carriage return or newline")
            )


def _validate_null_values(value: Any, path: str, errors: list[FieldError]) -> None:
    """`null_values`: a list of at most `MAX_NULL_VALUES` distinct strings, each at most
    `MAX_NULL_VALUE_CHARS` long (markers such as `NA`, `N/A`, `\\N`, `null`)."""
    if not is_list(value):
        errors.append(FieldError(path, "must be a list of strings"))
        return
    if len(value) > MAX_NULL_VALUES:
        errors.append(FieldError(path, f"at most {MAX_NULL_VALUES} values, got {len(value)}"))
    seen: set[str] = set()
    for i, item in enumerate(value):
        if not isinstance(item, str):
            errors.append(FieldError(f"{path}[{i}]", "must be a string"))
        elif len(item) > MAX_NULL_VALUE_CHARS:
            errors.append(FieldError(f"{path}[{i}]", f"at most {MAX_NULL_VALUE_CHARS} characters"))
        elif item in seen:
            errors.append(FieldError(f"{path}[{i}]", f"{item!r} is listed twice"))
        else:
            seen.add(item)


def _validate_columns(columns: Any, path: str, errors: list[FieldError]) -> None:
    if not isinstance(columns, Mapping):
        errors.append(FieldError(path, "must be an object of column name -> type"))
        return
    for column, column_type in columns.items():
        item = f"{path}.{column}"
        if not isinstance(column, str) or not column:
            errors.append(FieldError(item, "column name must be a non-empty string"))
        elif column_type not in COLUMN_TYPES:
            errors.append(FieldError(item, f"type must be one of {quoted(COLUMN_TYPES)}"))


def _defaults(config: dict[str, Any]) -> None:
    config.setdefault("format", "csv")
    config.setdefault("columns", {})
    if config["format"] == "csv":
        config.setdefault("delimiter", ",")


def _schema() -> dict[str, Any]:
    """A file ingest's config; a delimiter or quote only with the csv format (the
    default), in a form that keeps the config one typed model."""
    columns = {
        "type": "object",
        "propertyNames": {"minLength": 1, "pattern": NO_NUL},
        "additionalProperties": one_of(COLUMN_TYPES),
    }
    delimiter = {"type": "string", "minLength": 1, "maxLength": 1, "not": one_of(['"', "\r", "\n"])}
    schema = closed(
        {
            "source": one_of(["file"]),
            "path": REL_PATH_SCHEMA,
            "format": one_of(INGEST_FORMATS),
            "columns": columns,
            "delimiter": delimiter,
            "null_values": {
                "type": "array",
                "maxItems": MAX_NULL_VALUES,
                "uniqueItems": True,
                "items": {"type": "string", "maxLength": MAX_NULL_VALUE_CHARS, "pattern": NO_NUL},
            },
            "encoding": one_of(ENCODINGS),
            "quote": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1,
                "pattern": "^[\\x01-\\x7f]$",
                "not": one_of(["\r", "\n"]),
                "description": (
                    "the quote character; default '\"'. It must differ from the delimiter"
                    " (',' when none is given): a plan where they are the same is refused"
                    " (400 invalid_plan, field config.quote)"
                ),
            },
            "on_schema_change": one_of(SCHEMA_CHANGES),
        },
        ["source", "path"],
    )
    csv_only = {"properties": {"format": one_of(["csv"])}}
    schema["dependentSchemas"] = {"delimiter": csv_only, "quote": csv_only}
    return schema


FILE = IngestSource(
    "file",
    ("source", "path", "format", "columns", "delimiter", "null_values", *DIALECT_KEYS),
    _validate,
    _schema(),
    defaults=_defaults,
    path_key="path",
)
SOURCES = (FILE,)
