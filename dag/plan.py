"""Plan model and validation.

`validate_plan` checks a decoded JSON plan object (the `plan` member of a pipeline document,
see docs/plan-format.md) and returns every problem it finds, each with a field path starting at
`plan.` (`plan.steps[2].depends_on[0]`, `plan.steps[0].config.columns.id`). `parse_plan`
turns a valid object into frozen `Plan`/`Step` values with the defaults filled in and raises
`PlanInvalid` otherwise. Nothing here does I/O: paths are only checked for shape (relative,
no `..`); the connectors guard the file system itself.

Here: the plan's structure (steps, names, dependencies, retry, policies, file export targets
that collide). Each step's `config` is checked by `dag.stepconfig`, cycles are found by
`dag.cycles`.
"""

from __future__ import annotations

import copy
import heapq
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from dag.checks import validate_checks
from dag.cycles import cycle_message, find_cycles
from dag.errors import FieldError, PlanInvalid
from dag.fieldchecks import check_choice, check_keys, is_int, is_list, require_str
from dag.limits import (
    DEFAULT_MAX_ATTEMPTS,
    INT64_MAX,
    INT64_MIN,
    MAX_ATTEMPTS,
    MAX_STEPS,
    MIN_STEPS,
)
from dag.params import check_placeholders, validate_params
from dag.stepconfig import (
    EXPORT_FORMATS,
    EXPORT_MODES,
    EXPORT_TABLE_RE,
    EXPORT_TARGETS,
    INGEST_FORMATS,
    INGEST_SOURCES,
    TRANSFORM_OPS,
    validate_config,
    with_defaults,
)
from dag.targets import TARGETS
from dag.transforms import AGGREGATE_OUTPUTS
from dag.types import COLUMN_TYPES

# The plan rules' public face: other code (the OpenAPI spec, tests) reads the limits and the
# config vocabulary from `dag.plan`, wherever they are defined.
__all__ = [
    "AGGREGATE_OUTPUTS",
    "COLUMN_TYPES",
    "CONTINUE_INDEPENDENT",
    "DEFAULT_MAX_ATTEMPTS",
    "EXPORT_FORMATS",
    "EXPORT_MODES",
    "EXPORT_TABLE_RE",
    "EXPORT_TARGETS",
    "INGEST_FORMATS",
    "INGEST_SOURCES",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_ATTEMPTS",
    "MAX_STEPS",
    "MIN_STEPS",
    "ON_FAILURE_POLICIES",
    "ON_ROW_ERROR_MODES",
    "ON_ROW_ERROR_REJECT",
    "ON_ROW_ERROR_STOP",
    "STEP_NAME_RE",
    "STEP_TYPES",
    "STOP_DEPENDENTS",
    "TRANSFORM_OPS",
    "FieldError",
    "Plan",
    "PlanInvalid",
    "Step",
    "parse_plan",
    "topological_order",
    "validate_plan",
]

STEP_TYPES = ("ingest", "transform", "export")
STOP_DEPENDENTS, CONTINUE_INDEPENDENT = "stop_dependents", "continue_independent"
ON_FAILURE_POLICIES = (STOP_DEPENDENTS, CONTINUE_INDEPENDENT)
ON_ROW_ERROR_STOP, ON_ROW_ERROR_REJECT = "stop", "reject"
ON_ROW_ERROR_MODES = (ON_ROW_ERROR_STOP, ON_ROW_ERROR_REJECT)

# Step names end up in file names (staging chunks, reject files), so keep them path-safe.
STEP_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}")

_PLAN_KEYS = ("steps", "on_failure", "on_row_error", "params")
_STEP_KEYS = ("name", "type", "config", "depends_on", "retry", "checks")
_RETRY_KEYS = ("max_attempts",)


@dataclass(frozen=True)
class Step:
    """A validated step. `config` is a private deep copy with defaults filled in."""

    name: str
    type: str
    # A plain (JSON-able) dict: consumers serialise it; excluded from the hash.
    config: dict[str, Any] = field(default_factory=dict, hash=False)
    depends_on: tuple[str, ...] = ()
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    # The step's data checks (`dag.checks`), as written; excluded from the hash.
    checks: tuple[dict[str, Any], ...] = field(default=(), hash=False)

    def as_dict(self) -> dict[str, Any]:
        """The normalised step object (defaults explicit); `parse_plan` accepts it back."""
        return {
            "name": self.name,
            "type": self.type,
            "config": copy.deepcopy(self.config),
            "depends_on": list(self.depends_on),
            "retry": {"max_attempts": self.max_attempts},
            **({"checks": copy.deepcopy(list(self.checks))} if self.checks else {}),
        }


@dataclass(frozen=True)
class Plan:
    """A validated DAG of steps in the order the user wrote them, plus the run policies."""

    steps: tuple[Step, ...]
    on_failure: str = STOP_DEPENDENTS
    on_row_error: str = ON_ROW_ERROR_STOP
    # The run parameters' declarations (`dag.params`), as the plan wrote them.
    params: dict[str, Any] = field(default_factory=dict, hash=False)
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
        out: dict[str, Any] = {
            "on_failure": self.on_failure,
            "on_row_error": self.on_row_error,
            "steps": [s.as_dict() for s in self.steps],
        }
        if self.params:
            out["params"] = copy.deepcopy(self.params)
        return out


def validate_plan(obj: object) -> list[FieldError]:
    """Every problem in a decoded plan object, in document order; [] means valid.

    Never raises on any JSON value. Cycles are reported once each, on the `depends_on` of the
    cycle's first step in plan order, as `cycle: a -> b -> a` where `->` reads "depends on".
    """
    errors: list[FieldError] = []
    if not isinstance(obj, Mapping):
        return [FieldError("plan", "must be an object")]
    check_keys(obj, _PLAN_KEYS, "plan", errors)
    if "on_failure" in obj:
        check_choice(obj["on_failure"], ON_FAILURE_POLICIES, "plan.on_failure", errors)
    if "on_row_error" in obj:
        check_choice(obj["on_row_error"], ON_ROW_ERROR_MODES, "plan.on_row_error", errors)
    if "steps" not in obj:
        errors.append(FieldError("plan.steps", "is required"))
    elif not is_list(obj["steps"]):
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
    if "params" in obj:
        validate_params(obj["params"], "plan.params", errors)
    check_placeholders(obj, errors)
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
            config=with_defaults(raw["type"], raw["config"]),
            depends_on=tuple(raw.get("depends_on", ())),
            max_attempts=raw.get("retry", {}).get("max_attempts", DEFAULT_MAX_ATTEMPTS),
            checks=tuple(copy.deepcopy(list(raw.get("checks", ())))),
        )
        for raw in obj["steps"]
    )
    return Plan(
        steps=steps,
        on_failure=obj.get("on_failure", STOP_DEPENDENTS),
        on_row_error=obj.get("on_row_error", ON_ROW_ERROR_STOP),
        params=copy.deepcopy(dict(obj.get("params", {}))),
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
        cycles = [FieldError("plan.steps", cycle_message(c)) for c in find_cycles(edges)]
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
        check_keys(raw, _STEP_KEYS, path, errors)
        name = _validate_step_name(raw, path, first_index, i, errors)
        step_type = raw.get("type")
        type_ok = check_choice(step_type, STEP_TYPES, f"{path}.type", errors, "type" in raw)
        if "retry" in raw:
            _validate_retry(raw["retry"], f"{path}.retry", errors)
        if "checks" in raw:
            validate_checks(raw["checks"], f"{path}.checks", errors)
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
            validate_config(step_type, raw["config"], f"{path}.config", errors)

    for cycle in find_cycles(edges):
        errors.append(
            FieldError(f"plan.steps[{first_index[cycle[0]]}].depends_on", cycle_message(cycle))
        )
    _check_export_targets(steps, errors)


def _check_export_targets(steps: list[Any], errors: list[FieldError]) -> None:
    """Two file exports of one run writing the same path would silently overwrite each
    other: the later one is an error. One writing under the other's path (`out.jsonl` and
    `out.jsonl/x.jsonl`) could never succeed, a file being no directory: both are errors."""
    seen: dict[str, int] = {}
    keys: dict[int, str] = {}  # the path key of each export in `seen`
    for i, raw in enumerate(steps):
        config = raw.get("config") if isinstance(raw, Mapping) else None
        if not isinstance(raw, Mapping) or raw.get("type") != "export":
            continue
        path_key = _export_path_key(config)
        if path_key is None:
            continue
        target = config.get(path_key)
        if not isinstance(target, str):
            continue
        # the exporter reads "\\" as "/" too
        parts = target.replace("\\", "/").split("/")
        normal = "/".join(part for part in parts if part not in ("", "."))
        if normal in seen:
            errors.append(
                FieldError(
                    f"plan.steps[{i}].config.{path_key}",
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
                errors.append(FieldError(f"plan.steps[{j}].config.{keys[j]}", message))
                errors.append(FieldError(f"plan.steps[{i}].config.{path_key}", message))
        seen[normal], keys[i] = i, path_key


def _export_path_key(config: Any) -> str | None:
    """The key naming the file an export config (maybe invalid) writes, by its target
    (`dag.targets`; `file` when it names none); None when it writes no file."""
    if not isinstance(config, Mapping):
        return None
    target = config.get("target", "file")
    found = TARGETS.get(target) if isinstance(target, str) else None
    return None if found is None else found.path_key


def _validate_step_name(
    raw: Mapping[str, Any],
    path: str,
    first_index: dict[str, int],
    i: int,
    errors: list[FieldError],
) -> str | None:
    """The step's name if it is a non-empty string (even a badly formed one), else None."""
    name = require_str(raw, "name", path, errors)
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
    check_keys(retry, _RETRY_KEYS, path, errors)
    if "max_attempts" in retry:
        value = retry["max_attempts"]
        if not is_int(value) or not 1 <= value <= MAX_ATTEMPTS:
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
    if not is_list(deps):
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
