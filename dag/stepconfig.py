"""Step config validation: the `config` object of an ingest, transform or export step,
checked field by field against the rules of docs/plan-format.md (every problem a `FieldError`
at its path), and its documented defaults made explicit for `parse_plan`.

The field checkers at the end (`check_keys`, `check_choice`, `require_str`, ...) append to
the caller's error list rather than raise, so one pass reports every problem; the plan's own
fields (`dag.plan`) are checked with them too. Shape only, no I/O: paths are checked as
relative paths (`dag.paths`), the connectors guard the file system itself."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from dag.dialect import DIALECT_KEYS, validate_dialect
from dag.errors import FieldError
from dag.limits import INT64_MAX, INT64_MIN
from dag.paths import relative_path_problem
from dag.transforms import AGGREGATE_OUTPUTS
from dag.types import COLUMN_TYPES

INGEST_SOURCES = ("file", "table")
INGEST_FORMATS = ("csv", "json", "jsonl")
EXPORT_TARGETS = ("file", "table")
EXPORT_FORMATS = ("jsonl", "csv")
EXPORT_MODES = ("append", "merge")
TRANSFORM_OPS = ("trim", "normalize_whitespace", "map", "filter_eq", "parse_date", "aggregate")

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
_OP_KEYS = {
    "trim": ("op", "columns"),
    "normalize_whitespace": ("op", "columns"),
    "map": ("op", "column", "mapping", "into", "default"),
    "filter_eq": ("op", "column", "value"),
    "parse_date": ("op", "column"),
    "aggregate": ("op", "column", "group_by"),
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
            errors.append(FieldError(item, f"type must be one of {_quoted(COLUMN_TYPES)}"))


def _validate_transform(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    op = config.get("op")
    if "op" not in config:
        errors.append(FieldError(f"{path}.op", "is required"))
        return
    if not isinstance(op, str) or op not in _OP_KEYS:
        errors.append(
            FieldError(f"{path}.op", f"unknown op {op!r}; expected one of {_quoted(TRANSFORM_OPS)}")
        )
        return
    check_keys(config, _OP_KEYS[op], path, errors)
    if op in ("trim", "normalize_whitespace"):
        if "columns" not in config:
            errors.append(FieldError(f"{path}.columns", "is required"))
        else:
            _check_name_list(config["columns"], f"{path}.columns", errors, non_empty=True)
        return
    require_str(config, "column", path, errors)
    if op == "map":
        _validate_mapping(config, path, errors)
    elif op == "filter_eq":
        if "value" not in config:
            errors.append(FieldError(f"{path}.value", "is required (null is allowed)"))
        else:
            _check_literal(config["value"], f"{path}.value", errors)
    elif op == "aggregate" and "group_by" in config:
        group_by = config["group_by"]
        if _check_name_list(group_by, f"{path}.group_by", errors, non_empty=False):
            for k, column in enumerate(group_by):
                if column in AGGREGATE_OUTPUTS:
                    errors.append(
                        FieldError(
                            f"{path}.group_by[{k}]",
                            f"{column!r} clashes with an aggregate output column "
                            f"({_quoted(AGGREGATE_OUTPUTS)})",
                        )
                    )


def _validate_mapping(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    if "mapping" not in config:
        errors.append(FieldError(f"{path}.mapping", "is required"))
    elif not isinstance(config["mapping"], Mapping):
        errors.append(FieldError(f"{path}.mapping", "must be an object of value -> new value"))
    else:
        for source, target in config["mapping"].items():
            _check_literal(target, f"{path}.mapping.{source}", errors)
    if "into" in config:
        require_str(config, "into", path, errors)
    if "default" in config:
        _check_literal(config["default"], f"{path}.default", errors)


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


# --- field checks ----------------------------------------------------------------------


def is_int(value: Any) -> bool:
    """Whether `value` is a JSON integer."""
    # JSON true/false decode to bool, a subclass of int; they are not numbers here.
    return isinstance(value, int) and not isinstance(value, bool)


def is_list(value: Any) -> bool:
    """Whether `value` is a JSON array (a tuple too, for hand-built objects)."""
    return isinstance(value, list | tuple)


def _quoted(values: Iterable[str]) -> str:
    return ", ".join(repr(v) for v in values)


def check_keys(
    obj: Mapping[Any, Any], allowed: tuple[str, ...], path: str, errors: list[FieldError]
) -> None:
    """Records every key of `obj` that is not one of `allowed`."""
    for key in obj:
        if key not in allowed:
            errors.append(FieldError(f"{path}.{key}", f"unknown key; allowed: {_quoted(allowed)}"))


def check_choice(
    value: Any,
    allowed: tuple[str, ...],
    path: str,
    errors: list[FieldError],
    present: bool = True,
) -> bool:
    """True if `value` is one of `allowed`; otherwise records why not (absent or wrong)."""
    if not present:
        errors.append(FieldError(path, "is required"))
        return False
    if isinstance(value, str) and value in allowed:
        return True
    errors.append(FieldError(path, f"must be one of {_quoted(allowed)}, got {value!r}"))
    return False


def require_str(
    obj: Mapping[str, Any], key: str, path: str, errors: list[FieldError]
) -> str | None:
    """`obj[key]` if it is a non-empty string; otherwise records why not and returns None."""
    field_path = f"{path}.{key}"
    if key not in obj:
        errors.append(FieldError(field_path, "is required"))
        return None
    value = obj[key]
    if not isinstance(value, str):
        errors.append(FieldError(field_path, "must be a string"))
        return None
    if not value:
        errors.append(FieldError(field_path, "must not be empty"))
        return None
    return value


def _check_name_list(value: Any, path: str, errors: list[FieldError], *, non_empty: bool) -> bool:
    """A list of unique non-empty strings (column names); True if it is one."""
    if not is_list(value):
        errors.append(FieldError(path, "must be a list of column names"))
        return False
    if non_empty and not value:
        errors.append(FieldError(path, "must name at least one column"))
        return False
    ok = True
    seen: set[str] = set()
    for k, item in enumerate(value):
        if not isinstance(item, str) or not item:
            errors.append(FieldError(f"{path}[{k}]", "must be a non-empty string"))
            ok = False
        elif item in seen:
            errors.append(FieldError(f"{path}[{k}]", f"duplicate column {item!r}"))
            ok = False
        else:
            seen.add(item)
    return ok


def _check_literal(value: Any, path: str, errors: list[FieldError]) -> None:
    """A value a typed record can hold: a string, an int64 or null."""
    if value is None or isinstance(value, str):
        return
    if is_int(value):
        if not INT64_MIN <= value <= INT64_MAX:
            errors.append(FieldError(path, "integer is outside the int64 range"))
        return
    errors.append(FieldError(path, "must be a string, an integer or null"))


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
