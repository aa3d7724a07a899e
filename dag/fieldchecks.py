"""The field checkers of a plan's objects: each appends a `FieldError` at the field's path
to the caller's error list rather than raise, so one pass reports every problem. The step
configs (`dag.stepconfig`, the transform ops of `dag.ops`) and the plan's own fields
(`dag.plan`) are checked with them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dag.errors import FieldError
from dag.limits import INT64_MAX, INT64_MIN
from dag.paths import relative_path_problem


def is_int(value: Any) -> bool:
    """Whether `value` is a JSON integer."""
    # JSON true/false decode to bool, a subclass of int; they are not numbers here.
    return isinstance(value, int) and not isinstance(value, bool)


def is_list(value: Any) -> bool:
    """Whether `value` is a JSON array (a tuple too, for hand-built objects)."""
    return isinstance(value, list | tuple)


def quoted(values: Iterable[str]) -> str:
    return ", ".join(repr(v) for v in values)


def check_keys(
    obj: Mapping[Any, Any], allowed: tuple[str, ...], path: str, errors: list[FieldError]
) -> None:
    """Records every key of `obj` that is not one of `allowed`."""
    for key in obj:
        if key not in allowed:
            errors.append(FieldError(f"{path}.{key}", f"unknown key; allowed: {quoted(allowed)}"))


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
    errors.append(FieldError(path, f"must be one of {quoted(allowed)}, got {value!r}"))
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


def check_name_list(value: Any, path: str, errors: list[FieldError], *, non_empty: bool) -> bool:
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


def check_literal(value: Any, path: str, errors: list[FieldError]) -> None:
    """A value a typed record can hold: a string, an int64 or null."""
    if value is None or isinstance(value, str):
        return
    if is_int(value):
        if not INT64_MIN <= value <= INT64_MAX:
            errors.append(FieldError(path, "integer is outside the int64 range"))
        return
    errors.append(FieldError(path, "must be a string, an integer or null"))


def check_path_key(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    """`config["path"]`: required, a relative path by its shape only (`dag.paths`); the
    connectors guard the real file system."""
    if "path" not in config:
        errors.append(FieldError(f"{path}.path", "is required"))
        return
    value, where = config["path"], f"{path}.path"
    if not isinstance(value, str):
        errors.append(FieldError(where, "must be a string"))
    elif (problem := relative_path_problem(value)) is not None:
        errors.append(FieldError(where, problem))
