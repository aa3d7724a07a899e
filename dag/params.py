"""Run parameters: their declaration in a plan (`params`), the typing of a run's values, and
the substitution of `{NAME}` placeholders into the step configs that may hold them.

A plan declares `"params": {"day": {"type": "date", "default": "2026-12-01"}}`; names match
`PARAM_NAME_RE`, types are `PARAM_TYPES`. The templated fields are `TEMPLATED_FIELDS`: a file
ingest `path`, a file export `path` and the string `value` of `filter_eq`. A placeholder is
`{NAME}` or, for a date, `{NAME:STRFTIME}`; `{{` and `}}` stand for literal braces. Besides
the declared names a placeholder may use the built-ins (`BUILTIN_PARAMS`): `run_id` on every
run, and the interval of a scheduled run's fire.

`validate_params` and `check_placeholders` report problems as `FieldError`s for
`dag.plan.validate_plan`; `resolve_values` types a run's values (errors at `params.NAME`);
`resolve_plan` substitutes them into a plan object and checks every substituted path's shape
again, naming the parameter that led it astray. Pure: no I/O, no clock."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from dag.errors import DagError, FieldError
from dag.limits import INT64_MAX, INT64_MIN
from dag.paths import relative_path_problem
from dag.sources import SOURCES
from dag.targets import TARGETS

PARAM_TYPES = ("string", "int", "date")
PARAM_NAME_RE = re.compile(r"[a-z_][a-z0-9_]*")
MAX_PARAMS = 32
MAX_STRING_CHARS = 1024
MAX_RANGE_VALUES = 3660  # of a backfill: ten years of days
# Built-in values: every run has `run_id`; a scheduled run has its fire's interval too
# (docs/schedules.md). Their types, for the placeholders' formats.
BUILTIN_PARAMS = {
    "run_id": "string",
    "logical_date": "date",
    "interval_start": "string",
    "interval_end": "string",
}
SCHEDULE_BUILTINS = ("logical_date", "interval_start", "interval_end")
INTERVAL_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_PARAM_KEYS = ("type", "default")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


class ParamsInvalid(DagError):
    """A run's parameter values do not fit the plan; `errors` name each `params.NAME`."""

    def __init__(self, errors: list[FieldError]):
        self.errors = list(errors)
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in self.errors))


@dataclass(frozen=True)
class Placeholder:
    """One `{name}` or `{name:format}` of a template."""

    name: str
    format: str | None = None


def declared_params(plan: Any) -> dict[str, str]:
    """Name -> type of the well-formed declarations of a plan object (others ignored)."""
    raw = plan.get("params") if isinstance(plan, Mapping) else None
    if not isinstance(raw, Mapping):
        return {}
    return {
        name: spec["type"]
        for name, spec in raw.items()
        if isinstance(spec, Mapping) and spec.get("type") in PARAM_TYPES
    }


def validate_params(raw: Any, path: str, errors: list[FieldError]) -> None:
    """`params`: an object of at most `MAX_PARAMS` declarations, each `{"type", "default"?}`
    with a well-formed name that is no built-in and a default of its type."""
    if not isinstance(raw, Mapping):
        errors.append(FieldError(path, "must be an object of parameter declarations"))
        return
    if len(raw) > MAX_PARAMS:
        errors.append(FieldError(path, f"at most {MAX_PARAMS} parameters, got {len(raw)}"))
    for name, spec in raw.items():
        item = f"{path}.{name}"
        if not PARAM_NAME_RE.fullmatch(name):
            errors.append(FieldError(item, "a name is [a-z_][a-z0-9_]* (lower case)"))
        elif name in BUILTIN_PARAMS:
            errors.append(FieldError(item, f"{name!r} is a built-in parameter"))
        if not isinstance(spec, Mapping):
            errors.append(FieldError(item, 'must be an object {"type", "default"?}'))
            continue
        for key in spec:
            if key not in _PARAM_KEYS:
                errors.append(FieldError(f"{item}.{key}", "unknown field"))
        kind = spec.get("type")
        if kind not in PARAM_TYPES:
            errors.append(FieldError(f"{item}.type", f"must be one of {', '.join(PARAM_TYPES)}"))
        elif "default" in spec and (problem := value_problem(kind, spec["default"])):
            errors.append(FieldError(f"{item}.default", problem))


def value_problem(kind: str, value: Any) -> str | None:
    """Why `value` is not a value of parameter type `kind`, or None."""
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer"
        if not INT64_MIN <= value <= INT64_MAX:
            return "integer is outside the int64 range"
        return None
    if not isinstance(value, str):
        return "must be a string" if kind == "string" else "must be a date YYYY-MM-DD (string)"
    if kind == "date":
        return None if _parse_date(value) is not None else "must be a date YYYY-MM-DD"
    if len(value) > MAX_STRING_CHARS or "\x00" in value:
        return f"must be at most {MAX_STRING_CHARS} characters, without NUL"
    return None


def parse_template(text: str) -> list[str | Placeholder]:
    """The literal pieces and placeholders of `text`; ValueError says what is malformed."""
    parts: list[str | Placeholder] = []
    last = 0
    for match in _PLACEHOLDER.finditer(text):
        if match.start() > last:
            parts.append(text[last : match.start()])
        last = match.end()
        token = match.group(0)
        if token in ("{{", "}}"):
            parts.append(token[0])
        elif match.group(1) is None:
            raise ValueError(f"unmatched {token!r} at {match.start()} (write {token * 2})")
        else:
            name, sep, fmt = match.group(1).partition(":")
            if not PARAM_NAME_RE.fullmatch(name):
                raise ValueError(f"placeholder {token!r} does not name a parameter")
            parts.append(Placeholder(name, fmt if sep else None))
    if last < len(text):
        parts.append(text[last:])
    return parts


def templated_fields(plan: Any) -> Iterator[tuple[str, Any]]:
    """(field path, value) of every field of a plan object that may hold placeholders."""
    steps = plan.get("steps") if isinstance(plan, Mapping) else None
    for i, step in enumerate(steps if isinstance(steps, list) else []):
        config = step.get("config") if isinstance(step, Mapping) else None
        if not isinstance(config, Mapping):
            continue
        kind, base = step.get("type"), f"plan.steps[{i}].config"
        path_key = _path_key(kind, config)
        if path_key is not None and path_key in config:
            yield f"{base}.{path_key}", config[path_key]
        elif kind == "transform" and config.get("op") == "filter_eq":
            value = config.get("value")
            if isinstance(value, str):
                yield f"{base}.value", value


def _path_key(kind: Any, config: Mapping[str, Any]) -> str | None:
    """The key of a (maybe invalid) ingest or export config that names a file path, by its
    source or target (`file` when it names none); None for any other."""
    registry: Mapping[str, Any]
    if kind == "ingest":
        registry, name = SOURCES, config.get("source", "file")
    elif kind == "export":
        registry, name = TARGETS, config.get("target", "file")
    else:
        return None
    found = registry.get(name) if isinstance(name, str) else None
    return None if found is None else found.path_key


def check_placeholders(plan: Any, errors: list[FieldError]) -> None:
    """Every placeholder of the templated fields names a declared or built-in parameter, and
    only a date carries a format."""
    types = {**BUILTIN_PARAMS, **declared_params(plan)}
    for path, value in templated_fields(plan):
        if not isinstance(value, str):
            continue
        try:
            parts = parse_template(value)
        except ValueError as exc:
            errors.append(FieldError(path, str(exc)))
            continue
        for part in parts:
            if not isinstance(part, Placeholder):
                continue
            if part.name not in types:
                errors.append(FieldError(path, f"{{{part.name}}} names no declared parameter"))
            elif part.format is not None and types[part.name] != "date":
                errors.append(FieldError(path, f"{{{part.name}}}: only a date takes a format"))
            elif part.format is not None and not part.format:
                errors.append(FieldError(path, f"{{{part.name}:}}: the format is empty"))


def resolve_values(
    plan: Any, given: Mapping[str, Any], builtins: Mapping[str, Any]
) -> dict[str, Any]:
    """The run's values: `given` typed against the plan's declarations, defaults filled in,
    then `builtins`. Raises `ParamsInvalid` naming each unknown, mistyped or missing one."""
    raw = plan.get("params") if isinstance(plan, Mapping) else None
    declared = raw if isinstance(raw, Mapping) else {}
    errors: list[FieldError] = []
    values: dict[str, Any] = {}
    for name in given:
        if name not in declared:
            errors.append(FieldError(f"params.{name}", "is not a parameter of the plan"))
    for name, spec in declared.items():
        if name in given:
            problem = value_problem(spec["type"], given[name])
            if problem:
                errors.append(FieldError(f"params.{name}", problem))
            values[name] = given[name]
        elif "default" in spec:
            values[name] = spec["default"]
        else:
            errors.append(FieldError(f"params.{name}", "is required (it has no default)"))
    if errors:
        raise ParamsInvalid(errors)
    return {**values, **builtins}


def resolve_plan(plan: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a valid plan object with `values` substituted into its templated fields.
    A substituted path that is no longer a relative file path raises `ParamsInvalid` at
    `params.NAME` of the value that led it there. A `filter_eq` value that is one int
    placeholder becomes the int."""
    types = {**BUILTIN_PARAMS, **declared_params(plan)}
    out = copy.deepcopy(dict(plan))
    errors: list[FieldError] = []
    for path, value in list(templated_fields(out)):
        parts = parse_template(value)
        missing = [p.name for p in parts if isinstance(p, Placeholder) and p.name not in values]
        if missing:
            message = f"{path} uses {{{missing[0]}}}, which this run has no value for"
            if missing[0] in SCHEDULE_BUILTINS:
                message += " (only a scheduled run has it)"
            errors.append(FieldError(f"params.{missing[0]}", message))
            continue
        if not any(isinstance(p, Placeholder) for p in parts):
            new: Any = "".join(str(p) for p in parts)
        elif len(parts) == 1 and types.get(parts[0].name) == "int" and not parts[0].format:
            new = values[parts[0].name]
        else:
            new = "".join(_render(p, values) for p in parts)
        if path.endswith(".path") and (globbed := _globbing(parts, values)) is not None:
            message = f"{path}: a value may not add the glob characters *, ? or ["
            errors.append(FieldError(f"params.{globbed}", message))
        elif path.endswith(".path") and (problem := relative_path_problem(new)) is not None:
            name = _blame(parts, values)
            errors.append(FieldError(f"params.{name}", f"{path}: {new!r} {problem}"))
        _set_field(out, path, new)
    if errors:
        raise ParamsInvalid(errors)
    return out


def interval_values(end: datetime, period: timedelta) -> dict[str, str]:
    """The built-ins of the run that processes the interval `[end - period, end)` (`end`
    aware): `interval_start`, `interval_end` (ISO 8601 UTC to the second) and
    `logical_date`, the interval's start date (docs/schedules.md)."""
    end = end.astimezone(UTC)
    start = end - period
    return {
        "logical_date": start.date().isoformat(),
        "interval_start": start.strftime(INTERVAL_FORMAT),
        "interval_end": end.strftime(INTERVAL_FORMAT),
    }


def parse_interval_time(text: str) -> datetime:
    """An `interval_start`/`interval_end` value (`2026-12-01T00:00:00Z`) as an aware time."""
    return datetime.strptime(text, INTERVAL_FORMAT).replace(tzinfo=UTC)


def uses_placeholders(plan: Any) -> bool:
    """True when a templated field of the plan holds a placeholder or an escaped brace."""
    return any(isinstance(v, str) and ("{" in v or "}" in v) for _, v in templated_fields(plan))


def value_range(kind: str, first: Any, last: Any) -> list[Any]:
    """The values from `first` to `last` inclusive, ascending, of an `int` (step 1) or a
    `date` (step one day) parameter; ValueError says why there are none or too many."""
    if kind not in ("int", "date"):
        raise ValueError(f"a {kind} parameter has no range: only int and date step")
    for end in (first, last):
        if problem := value_problem(kind, end):
            raise ValueError(f"{end!r}: {problem}")
    if kind == "int":
        low, high = int(first), int(last)
    else:
        low, high = _ordinal(first), _ordinal(last)
    if low > high:
        raise ValueError(f"from ({first}) is after to ({last})")
    if high - low + 1 > MAX_RANGE_VALUES:
        raise ValueError(f"at most {MAX_RANGE_VALUES} values, got {high - low + 1}")
    if kind == "int":
        return list(range(low, high + 1))
    return [date.fromordinal(n).isoformat() for n in range(low, high + 1)]


def _ordinal(value: str) -> int:
    day = _parse_date(value)
    assert day is not None
    return day.toordinal()


def _globbing(parts: list[str | Placeholder], values: Mapping[str, Any]) -> str | None:
    """The first parameter whose rendered value holds a glob character: a value names a
    file, it never widens a path into a pattern (the plan's own text may be a glob)."""
    for part in parts:
        if isinstance(part, Placeholder) and any(c in _render(part, values) for c in "*?["):
            return part.name
    return None


def _blame(parts: list[str | Placeholder], values: Mapping[str, Any]) -> str:
    """The parameter whose value makes the rendered path bad: the first whose replacement by
    a plain name makes it good (else the first placeholder's)."""
    names = list(dict.fromkeys(p.name for p in parts if isinstance(p, Placeholder)))
    for name in names:
        tame = {**values, name: "x"}
        tamed = [
            Placeholder(p.name) if isinstance(p, Placeholder) and p.name == name else p
            for p in parts
        ]
        if relative_path_problem("".join(_render(p, tame) for p in tamed)) is None:
            return name
    return names[0]


def _render(part: str | Placeholder, values: Mapping[str, Any]) -> str:
    if not isinstance(part, Placeholder):
        return part
    value = values[part.name]
    if part.format is None:
        return str(value)
    day = _parse_date(value)
    if day is None:  # a built-in or default the caller did not type: shown as it is
        return str(value)
    return day.strftime(part.format)


def _set_field(plan: dict[str, Any], path: str, value: Any) -> None:
    # path: plan.steps[I].config.KEY, as templated_fields yields it
    match = re.fullmatch(r"plan\.steps\[(\d+)\]\.config\.(\w+)", path)
    assert match is not None, path
    plan["steps"][int(match.group(1))]["config"][match.group(2)] = value


def _parse_date(value: Any) -> date | None:
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None
