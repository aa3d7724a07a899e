"""A run's parameter values, as admission binds them (`service.domain.runs.admit_run`): the
caller's values typed against the plan's declarations, defaults and built-ins applied, and
the plan with them substituted (`dag.params`). Pure functions of plain values: the caller
stores what they return on the run, in its own transaction.

Errors: `ValidationFailed` (400, code `invalid_params`) naming each `params.NAME` that is
unknown, mistyped, missing or leads a path out of its directory; `Conflict` (409, code
`params_mismatch`) for a trigger key reused with other values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dag import ParamsInvalid, resolve_plan, resolve_values, uses_placeholders
from service.errors import Conflict, ValidationFailed

RUN_ID = "run_id"


@dataclass(frozen=True)
class BoundParams:
    """Every value of a run (`params`) and its plan with them substituted (`plan`), None
    when the plan has no placeholder (the revision's plan is the run's)."""

    values: dict[str, Any]
    plan: dict[str, Any] | None


def bind_params(
    plan: Any, given: Mapping[str, Any], builtins: Mapping[str, Any], run_id: str
) -> BoundParams:
    """The values and substituted plan of a new run `run_id` of `plan` (a valid plan)."""
    try:
        values = resolve_values(plan, given, {**builtins, RUN_ID: run_id})
        resolved = resolve_plan(plan, values) if uses_placeholders(plan) else None
    except ParamsInvalid as exc:
        raise invalid_params(exc) from None
    return BoundParams(values, resolved)


def check_same_params(
    plan: Any, given: Mapping[str, Any], builtins: Mapping[str, Any], run: Mapping[str, Any]
) -> None:
    """A trigger key's repeat must ask for the values its run has: `Conflict` naming the
    first that differs (values the run does not hold, from a later declaration, are not
    compared; `run_id` never is)."""
    try:
        asked = resolve_values(plan, given, builtins)
    except ParamsInvalid as exc:
        raise invalid_params(exc) from None
    held = run.get("params") or {}
    for name, value in asked.items():
        if name in held and held[name] != value:
            raise Conflict(
                f"trigger key {run['trigger_key']!r} already made run {run['id']} with"
                f" {name}={held[name]!r}, not {value!r}: use another key for other values",
                code="params_mismatch",
                details=[{"field": f"params.{name}", "message": f"the run has {held[name]!r}"}],
            )


def invalid_params(exc: ParamsInvalid) -> ValidationFailed:
    """The 400 of values that do not fit the plan, one detail per parameter."""
    details = [e.as_dict() for e in exc.errors]
    names = ", ".join(d["field"] for d in details)
    return ValidationFailed(
        f"the run's parameters do not fit the plan: {names}", code="invalid_params", details=details
    )
