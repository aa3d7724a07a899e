"""Step config validation: the `config` object of an ingest, transform or export step,
checked field by field against the rules of docs/plan-format.md (every problem a `FieldError`
at its path), and its documented defaults made explicit for `parse_plan`.

The field checkers (`dag.fieldchecks`) append to the caller's error list rather than raise,
so one pass reports every problem. A transform's config is checked by its op
(`dag.ops`). Shape only, no I/O: paths are checked as
relative paths (`dag.paths`), the connectors guard the file system itself."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from dag.dialect import DIALECT_KEYS, validate_dialect
from dag.errors import FieldError
from dag.fieldchecks import check_choice, check_keys, is_list, quoted, require_str
from dag.ops import OPS
from dag.paths import relative_path_problem
from dag.types import COLUMN_TYPES

INGEST_SOURCES = ("file", "table")
INGEST_FORMATS = ("csv", "json", "jsonl")
EXPORT_TARGETS = ("file", "table")
EXPORT_FORMATS = ("jsonl", "csv")
EXPORT_MODES = ("append", "merge")
TRANSFORM_OPS = tuple(OPS)

# Export tables become unquoted identifiers in `sandbox.NAME`.
EXPORT_TABLE_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_INGEST_KEYS = {
    "file": ("source", "path", "format", "columns", "delimiter", "null_values", *DIALECT_KEYS),
    "table": ("source", "table", "cursor"),
}
_EXPORT_KEYS = {
    "file": ("target", "path", "format"),
    "table": ("target", "table", "key", "mode", "deleted"),
}


MAX_NULL_VALUES = 32
MAX_NULL_VALUE_CHARS = 64


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


def _validate_ingest(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    source = config.get("source")
    if not check_choice(source, INGEST_SOURCES, f"{path}.source", errors, "source" in config):
        return
    check_keys(config, _INGEST_KEYS[source], path, errors)
    if source == "table":
        require_str(config, "table", path, errors)
        if "cursor" in config:
            require_str(config, "cursor", path, errors)
        return
    _check_path_key(config, path, errors)
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


def _validate_transform(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    op = config.get("op")
    if "op" not in config:
        errors.append(FieldError(f"{path}.op", "is required"))
        return
    if not isinstance(op, str) or op not in OPS:
        errors.append(
            FieldError(f"{path}.op", f"unknown op {op!r}; expected one of {quoted(TRANSFORM_OPS)}")
        )
        return
    check_keys(config, OPS[op].keys, path, errors)
    OPS[op].validate(config, path, errors)


def _validate_export(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    target = config.get("target")
    if not check_choice(target, EXPORT_TARGETS, f"{path}.target", errors, "target" in config):
        return
    check_keys(config, _EXPORT_KEYS[target], path, errors)
    if target == "file":
        _check_path_key(config, path, errors)
        check_choice(config.get("format", "jsonl"), EXPORT_FORMATS, f"{path}.format", errors)
        return
    table = require_str(config, "table", path, errors)
    if table is not None and not EXPORT_TABLE_RE.fullmatch(table):
        errors.append(
            FieldError(
                f"{path}.table",
                "must be 1-63 characters of lowercase letters, digits and '_', "
                "not starting with a digit",
            )
        )
    if "key" in config:
        require_str(config, "key", path, errors)
    mode = config.get("mode", "append")
    merge = check_choice(mode, EXPORT_MODES, f"{path}.mode", errors) and mode == "merge"
    if merge and "key" not in config:
        errors.append(FieldError(f"{path}.key", 'required with "mode": "merge" (one row per key)'))
    if "deleted" in config:
        _check_deleted(config, path, errors, merge)


def _check_deleted(
    config: Mapping[str, Any], path: str, errors: list[FieldError], merge: bool
) -> None:
    """A merge export's `deleted`: the column whose non-null value deletes the key."""
    deleted = require_str(config, "deleted", path, errors)
    if deleted is None:
        return
    if not merge:
        errors.append(FieldError(f"{path}.deleted", 'only with "mode": "merge"'))
    elif deleted == config.get("key"):
        errors.append(FieldError(f"{path}.deleted", "must not be the key column"))


_CONFIG_VALIDATORS = {
    "ingest": _validate_ingest,
    "transform": _validate_transform,
    "export": _validate_export,
}


def validate_config(
    step_type: str, config: Mapping[str, Any], path: str, errors: list[FieldError]
) -> None:
    """Append to `errors` every problem of the config object of a step of `step_type`
    (one of `plan.STEP_TYPES`), each with a field path under `path`."""
    _CONFIG_VALIDATORS[step_type](config, path, errors)


def with_defaults(step_type: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a valid config with its documented defaults made explicit."""
    filled = copy.deepcopy(dict(config))
    if step_type == "ingest" and filled["source"] == "file":
        filled.setdefault("format", "csv")
        filled.setdefault("columns", {})
        if filled["format"] == "csv":
            filled.setdefault("delimiter", ",")
    elif step_type == "export" and filled["target"] == "file":
        filled.setdefault("format", "jsonl")
    return filled


def _check_path_key(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    if "path" not in config:
        errors.append(FieldError(f"{path}.path", "is required"))
    else:
        _check_relative_path(config["path"], f"{path}.path", errors)


def _check_relative_path(value: Any, path: str, errors: list[FieldError]) -> None:
    """Shape only (`dag.paths`); the connectors guard the real file system."""
    if not isinstance(value, str):
        errors.append(FieldError(path, "must be a string"))
    elif (problem := relative_path_problem(value)) is not None:
        errors.append(FieldError(path, problem))
