"""Plan model and validation.

`validate_plan` checks a decoded JSON plan object (the `plan` member of a pipeline document,
see docs/plan-format.md) and returns every problem it finds, each with a field path starting at
`plan.` (`plan.steps[2].depends_on[0]`, `plan.steps[0].config.columns.id`). `parse_plan`
turns a valid object into frozen `Plan`/`Step` values with the defaults filled in and raises
`PlanInvalid` otherwise. Nothing here does I/O: paths are only checked for shape (relative,
no `..`); the connectors guard the file system itself.
"""

from __future__ import annotations

import copy
import heapq
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from dag.errors import FieldError, PlanInvalid
from dag.limits import (
    DEFAULT_MAX_ATTEMPTS,
    INT64_MAX,
    INT64_MIN,
    MAX_ATTEMPTS,
    MAX_STEPS,
    MIN_STEPS,
)
from dag.paths import relative_path_problem
from dag.transforms import AGGREGATE_OUTPUTS
from dag.types import COLUMN_TYPES

STEP_TYPES = ("ingest", "transform", "export")
STOP_DEPENDENTS, CONTINUE_INDEPENDENT = "stop_dependents", "continue_independent"
ON_FAILURE_POLICIES = (STOP_DEPENDENTS, CONTINUE_INDEPENDENT)
ON_ROW_ERROR_STOP, ON_ROW_ERROR_REJECT = "stop", "reject"
ON_ROW_ERROR_MODES = (ON_ROW_ERROR_STOP, ON_ROW_ERROR_REJECT)
INGEST_SOURCES = ("file", "table")
INGEST_FORMATS = ("csv", "json", "jsonl")
EXPORT_TARGETS = ("file", "table")
EXPORT_FORMATS = ("jsonl", "csv")
TRANSFORM_OPS = ("trim", "normalize_whitespace", "map", "filter_eq", "parse_date", "aggregate")

# Step names end up in file names (staging chunks, reject files), so keep them path-safe.
STEP_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}")
# Export tables become unquoted identifiers in `sandbox.NAME`.
EXPORT_TABLE_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_PLAN_KEYS = ("steps", "on_failure", "on_row_error")
_STEP_KEYS = ("name", "type", "config", "depends_on", "retry")
_RETRY_KEYS = ("max_attempts",)
_INGEST_KEYS = {
    "file": ("source", "path", "format", "columns", "delimiter"),
    "table": ("source", "table"),
}
_EXPORT_KEYS = {"file": ("target", "path", "format"), "table": ("target", "table", "key")}
_OP_KEYS = {
    "trim": ("op", "columns"),
    "normalize_whitespace": ("op", "columns"),
    "map": ("op", "column", "mapping", "into", "default"),
    "filter_eq": ("op", "column", "value"),
    "parse_date": ("op", "column"),
    "aggregate": ("op", "column", "group_by"),
}


@dataclass(frozen=True)
class Step:
    """A validated step. `config` is a private deep copy with defaults filled in."""

    name: str
    type: str
    # A plain (JSON-able) dict: consumers serialise it; excluded from the hash.
    config: dict[str, Any] = field(default_factory=dict, hash=False)
    depends_on: tuple[str, ...] = ()
    max_attempts: int = DEFAULT_MAX_ATTEMPTS

    def as_dict(self) -> dict[str, Any]:
        """The normalised step object (defaults explicit); `parse_plan` accepts it back."""
        return {
            "name": self.name,
            "type": self.type,
            "config": copy.deepcopy(self.config),
            "depends_on": list(self.depends_on),
            "retry": {"max_attempts": self.max_attempts},
        }


@dataclass(frozen=True)
class Plan:
    """A validated DAG of steps in the order the user wrote them, plus the run policies."""

    steps: tuple[Step, ...]
    on_failure: str = STOP_DEPENDENTS
    on_row_error: str = ON_ROW_ERROR_STOP
    _by_name: dict[str, Step] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(self.steps))
        object.__setattr__(self, "_by_name", {s.name: s for s in self.steps})

    @property
    def step_names(self) -> tuple[str, ...]:
        """Step names in plan order."""
        return tuple(s.name for s in self.steps)

    def step(self, name: str) -> Step:
        """The step called `name`; KeyError if there is none."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no step {name!r} in the plan") from None

    def dependents(self, name: str) -> tuple[str, ...]:
        """Steps that depend directly on `name`, in plan order."""
        self.step(name)
        return tuple(s.name for s in self.steps if name in s.depends_on)

    def descendants(self, name: str) -> tuple[str, ...]:
        """Steps that depend on `name` directly or transitively, in plan order."""
        self.step(name)
        found: set[str] = set()
        frontier = [name]
        while frontier:
            current = frontier.pop()
            for child in self.dependents(current):
                if child not in found:
                    found.add(child)
                    frontier.append(child)
        return tuple(s.name for s in self.steps if s.name in found)

    def as_dict(self) -> dict[str, Any]:
        """The normalised plan object (JSON-able); `parse_plan(p.as_dict()) == p`."""
        return {
            "on_failure": self.on_failure,
            "on_row_error": self.on_row_error,
            "steps": [s.as_dict() for s in self.steps],
        }


def validate_plan(obj: object) -> list[FieldError]:
    """Every problem in a decoded plan object, in document order; [] means valid.

    Never raises on any JSON value. Cycles are reported once each, on the `depends_on` of the
    cycle's first step in plan order, as `cycle: a -> b -> a` where `->` reads "depends on".
    """
    errors: list[FieldError] = []
    if not isinstance(obj, Mapping):
        return [FieldError("plan", "must be an object")]
    _check_keys(obj, _PLAN_KEYS, "plan", errors)
    if "on_failure" in obj:
        _check_choice(obj["on_failure"], ON_FAILURE_POLICIES, "plan.on_failure", errors)
    if "on_row_error" in obj:
        _check_choice(obj["on_row_error"], ON_ROW_ERROR_MODES, "plan.on_row_error", errors)
    if "steps" not in obj:
        errors.append(FieldError("plan.steps", "is required"))
    elif not _is_list(obj["steps"]):
        errors.append(FieldError("plan.steps", "must be a list of steps"))
    else:
        steps = obj["steps"]
        if not MIN_STEPS <= len(steps) <= MAX_STEPS:
            errors.append(
                FieldError(
                    "plan.steps", f"must have {MIN_STEPS} to {MAX_STEPS} steps, got {len(steps)}"
                )
            )
        _validate_steps(steps, errors)
    return errors


def parse_plan(obj: object) -> Plan:
    """A `Plan` from a decoded plan object, defaults filled in; raises `PlanInvalid`."""
    errors = validate_plan(obj)
    if errors:
        raise PlanInvalid(errors)
    obj = cast(Mapping[str, Any], obj)  # validate_plan accepted it, so it is an object
    steps = tuple(
        Step(
            name=raw["name"],
            type=raw["type"],
            config=_with_defaults(raw["type"], raw["config"]),
            depends_on=tuple(raw.get("depends_on", ())),
            max_attempts=raw.get("retry", {}).get("max_attempts", DEFAULT_MAX_ATTEMPTS),
        )
        for raw in obj["steps"]
    )
    return Plan(
        steps=steps,
        on_failure=obj.get("on_failure", STOP_DEPENDENTS),
        on_row_error=obj.get("on_row_error", ON_ROW_ERROR_STOP),
    )


def topological_order(plan: Plan) -> list[str]:
    """Step names with every dependency before its dependents; ties keep plan order.

    Raises `PlanInvalid` if the plan (built by hand, not by `parse_plan`) has a cycle.
    """
    index = {s.name: i for i, s in enumerate(plan.steps)}
    waiting = {s.name: len(set(s.depends_on)) for s in plan.steps}
    heap = [i for i, s in enumerate(plan.steps) if waiting[s.name] == 0]
    heapq.heapify(heap)
    order: list[str] = []
    while heap:
        name = plan.steps[heapq.heappop(heap)].name
        order.append(name)
        for child in plan.dependents(name):
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(heap, index[child])
    if len(order) < len(plan.steps):
        # Only a hand-built Plan gets here: parse_plan rejects both cases.
        unknown = [
            FieldError(f"plan.steps[{i}].depends_on", f"unknown step {dep!r}")
            for i, s in enumerate(plan.steps)
            for dep in s.depends_on
            if dep not in index
        ]
        edges = {s.name: [d for d in dict.fromkeys(s.depends_on) if d in index] for s in plan.steps}
        cycles = [FieldError("plan.steps", _cycle_message(c)) for c in _find_cycles(edges)]
        raise PlanInvalid(unknown + cycles)
    return order


# --- steps ---------------------------------------------------------------------------------


def _validate_steps(steps: list[Any], errors: list[FieldError]) -> None:
    # Names are collected first so a dependency may name a later step.
    first_index: dict[str, int] = {}
    for i, raw in enumerate(steps):
        name = raw.get("name") if isinstance(raw, Mapping) else None
        if isinstance(name, str) and name and name not in first_index:
            first_index[name] = i

    edges: dict[str, list[str]] = {}  # name -> valid dependencies, first occurrences only
    for i, raw in enumerate(steps):
        path = f"plan.steps[{i}]"
        if not isinstance(raw, Mapping):
            errors.append(FieldError(path, "must be an object"))
            continue
        _check_keys(raw, _STEP_KEYS, path, errors)
        name = _validate_step_name(raw, path, first_index, i, errors)
        step_type = raw.get("type")
        type_ok = _check_choice(step_type, STEP_TYPES, f"{path}.type", errors, "type" in raw)
        if "retry" in raw:
            _validate_retry(raw["retry"], f"{path}.retry", errors)
        deps = _validate_depends_on(
            raw, path, name, first_index, step_type if type_ok else None, errors
        )
        if name is not None and first_index.get(name) == i:
            edges[name] = deps
        if "config" not in raw:
            errors.append(FieldError(f"{path}.config", "is required"))
        elif not isinstance(raw["config"], Mapping):
            errors.append(FieldError(f"{path}.config", "must be an object"))
        elif type_ok:
            _CONFIG_VALIDATORS[step_type](raw["config"], f"{path}.config", errors)

    for cycle in _find_cycles(edges):
        errors.append(
            FieldError(f"plan.steps[{first_index[cycle[0]]}].depends_on", _cycle_message(cycle))
        )
    _check_export_targets(steps, errors)


def _check_export_targets(steps: list[Any], errors: list[FieldError]) -> None:
    """Two file exports of one run writing the same path would silently overwrite each
    other: the later one is an error. One writing under the other's path (`out.jsonl` and
    `out.jsonl/x.jsonl`) could never succeed, a file being no directory: both are errors."""
    seen: dict[str, int] = {}
    for i, raw in enumerate(steps):
        config = raw.get("config") if isinstance(raw, Mapping) else None
        if not isinstance(raw, Mapping) or raw.get("type") != "export":
            continue
        if not isinstance(config, Mapping) or config.get("target", "file") != "file":
            continue
        target = config.get("path")
        if not isinstance(target, str):
            continue
        # the exporter reads "\\" as "/" too
        parts = target.replace("\\", "/").split("/")
        normal = "/".join(part for part in parts if part not in ("", "."))
        if normal in seen:
            errors.append(
                FieldError(
                    f"plan.steps[{i}].config.path",
                    f"{target!r} is already written by plan.steps[{seen[normal]}]",
                )
            )
            continue
        for other, j in seen.items():
            if normal.startswith(other + "/") or other.startswith(normal + "/"):
                file_path, dir_path = (
                    (other, normal) if len(other) < len(normal) else (normal, other)
                )
                message = f"{file_path!r} is a file, so {dir_path!r} cannot be written under it"
                errors.append(FieldError(f"plan.steps[{j}].config.path", message))
                errors.append(FieldError(f"plan.steps[{i}].config.path", message))
        seen[normal] = i


def _validate_step_name(
    raw: Mapping[str, Any],
    path: str,
    first_index: dict[str, int],
    i: int,
    errors: list[FieldError],
) -> str | None:
    """The step's name if it is a non-empty string (even a badly formed one), else None."""
    name = _require_str(raw, "name", path, errors)
    if name is None:
        return None
    if not STEP_NAME_RE.fullmatch(name):
        errors.append(
            FieldError(
                f"{path}.name",
                "must be 1-63 characters of letters, digits, '_', '.', '-' "
                "and not start with '.' or '-'",
            )
        )
    first = first_index[name]
    if first != i:
        errors.append(
            FieldError(
                f"{path}.name", f"duplicate step name {name!r} (first at plan.steps[{first}])"
            )
        )
    return name


def _validate_retry(retry: Any, path: str, errors: list[FieldError]) -> None:
    if not isinstance(retry, Mapping):
        errors.append(FieldError(path, "must be an object"))
        return
    _check_keys(retry, _RETRY_KEYS, path, errors)
    if "max_attempts" in retry:
        value = retry["max_attempts"]
        if not _is_int(value) or not 1 <= value <= MAX_ATTEMPTS:
            errors.append(
                FieldError(f"{path}.max_attempts", f"must be an integer from 1 to {MAX_ATTEMPTS}")
            )


def _validate_depends_on(
    raw: Mapping[str, Any],
    path: str,
    name: str | None,
    first_index: dict[str, int],
    step_type: str | None,
    errors: list[FieldError],
) -> list[str]:
    """Checks `depends_on` and returns the dependencies that name other, existing steps."""
    field_path = f"{path}.depends_on"
    deps = raw.get("depends_on", [])
    if not _is_list(deps):
        errors.append(FieldError(field_path, "must be a list of step names"))
        return []
    if step_type == "ingest" and deps:
        errors.append(FieldError(field_path, "an ingest step has no dependencies"))
    elif step_type in ("transform", "export") and not deps:
        errors.append(FieldError(field_path, f"a {step_type} step needs at least one dependency"))
    valid: list[str] = []
    seen: set[str] = set()
    for k, dep in enumerate(deps):
        item = f"{field_path}[{k}]"
        if not isinstance(dep, str):
            errors.append(FieldError(item, "must be a step name (string)"))
        elif dep in seen:
            errors.append(FieldError(item, f"duplicate dependency {dep!r}"))
        elif name is not None and dep == name:
            errors.append(FieldError(item, "a step cannot depend on itself"))
        elif dep not in first_index:
            errors.append(FieldError(item, f"unknown step {dep!r}"))
        else:
            valid.append(dep)
        if isinstance(dep, str):
            seen.add(dep)
    return valid


# --- configs -------------------------------------------------------------------------------


def _validate_ingest(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    source = config.get("source")
    if not _check_choice(source, INGEST_SOURCES, f"{path}.source", errors, "source" in config):
        return
    _check_keys(config, _INGEST_KEYS[source], path, errors)
    if source == "table":
        _require_str(config, "table", path, errors)
        return
    _check_path_key(config, path, errors)
    fmt = config.get("format", "csv")
    format_ok = _check_choice(fmt, INGEST_FORMATS, f"{path}.format", errors)
    if "columns" in config:
        _validate_columns(config["columns"], f"{path}.columns", errors)
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
    _check_keys(config, _OP_KEYS[op], path, errors)
    if op in ("trim", "normalize_whitespace"):
        if "columns" not in config:
            errors.append(FieldError(f"{path}.columns", "is required"))
        else:
            _check_name_list(config["columns"], f"{path}.columns", errors, non_empty=True)
        return
    _require_str(config, "column", path, errors)
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
        _require_str(config, "into", path, errors)
    if "default" in config:
        _check_literal(config["default"], f"{path}.default", errors)


def _validate_export(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    target = config.get("target")
    if not _check_choice(target, EXPORT_TARGETS, f"{path}.target", errors, "target" in config):
        return
    _check_keys(config, _EXPORT_KEYS[target], path, errors)
    if target == "file":
        _check_path_key(config, path, errors)
        _check_choice(config.get("format", "jsonl"), EXPORT_FORMATS, f"{path}.format", errors)
        return
    table = _require_str(config, "table", path, errors)
    if table is not None and not EXPORT_TABLE_RE.fullmatch(table):
        errors.append(
            FieldError(
                f"{path}.table",
                "must be 1-63 characters of lowercase letters, digits and '_', "
                "not starting with a digit",
            )
        )
    if "key" in config:
        _require_str(config, "key", path, errors)


_CONFIG_VALIDATORS = {
    "ingest": _validate_ingest,
    "transform": _validate_transform,
    "export": _validate_export,
}


def _with_defaults(step_type: str, config: Mapping[str, Any]) -> dict[str, Any]:
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


# --- cycles --------------------------------------------------------------------------------


def _find_cycles(edges: Mapping[str, list[str]]) -> list[list[str]]:
    """One cycle per strongly connected component, as [a, b, ..., a] along `edges`.

    Each cycle starts at the component's first node in `edges` order and is the shortest
    one back to it, so the report is deterministic. Self-edges are the caller's business.
    """
    position = {name: i for i, name in enumerate(edges)}
    cycles = []
    for component in _strongly_connected(edges):
        if len(component) < 2:
            continue
        start = min(component, key=position.__getitem__)
        members = set(component)
        parent: dict[str, str] = {start: start}
        queue = [start]
        for node in queue:
            nxt = next((d for d in edges[node] if d == start), None)
            if nxt is not None:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                cycles.append([*reversed(path), start])
                break
            for dep in edges[node]:
                if dep in members and dep not in parent:
                    parent[dep] = node
                    queue.append(dep)
    cycles.sort(key=lambda c: position[c[0]])
    return cycles


def _strongly_connected(edges: Mapping[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative so a long chain cannot exhaust the recursion limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for root in edges:
        if root in index:
            continue
        visit(root)
        work = [(root, iter(edges[root]))]
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    visit(child)
                    work.append((child, iter(edges[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def _cycle_message(cycle: list[str]) -> str:
    return "cycle: " + " -> ".join(cycle)


# --- value checks --------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    # JSON true/false decode to bool, a subclass of int; they are not numbers here.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _quoted(values: Iterable[str]) -> str:
    return ", ".join(repr(v) for v in values)


def _check_keys(
    obj: Mapping[Any, Any], allowed: tuple[str, ...], path: str, errors: list[FieldError]
) -> None:
    for key in obj:
        if key not in allowed:
            errors.append(FieldError(f"{path}.{key}", f"unknown key; allowed: {_quoted(allowed)}"))


def _check_choice(
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


def _require_str(
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
    if not _is_list(value):
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
    if _is_int(value):
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
