"""The plans the tests of `dag.plan` start from: the contract's sample plan, ways to change
one step or config of it, and the assertions on validation errors they share."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from dag.plan import (
    validate_plan,
)

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DELETE = object()  # marks a key to remove in with_step / with_config
PLANS_DIR = Path(__file__).resolve().parents[3] / "fixtures" / "plans"

# The plan object of docs/plan-format.md.
BASE: dict[str, Any] = {
    "on_failure": "stop_dependents",
    "on_row_error": "reject",
    "steps": [
        {
            "name": "read",
            "type": "ingest",
            "config": {
                "source": "file",
                "path": "customers.csv",
                "format": "csv",
                "columns": {"id": "int", "amount": "int", "signup": "date"},
            },
        },
        {
            "name": "clean",
            "type": "transform",
            "depends_on": ["read"],
            "config": {"op": "normalize_whitespace", "columns": ["name"]},
        },
        {
            "name": "to_table",
            "type": "export",
            "depends_on": ["clean"],
            "config": {"target": "table", "table": "customers", "key": "id"},
        },
        {
            "name": "to_file",
            "type": "export",
            "depends_on": ["clean"],
            "config": {"target": "file", "path": "customers.jsonl", "format": "jsonl"},
        },
    ],
}


def base() -> dict[str, Any]:
    return copy.deepcopy(BASE)


def with_step(i: int, **changes: Any) -> dict[str, Any]:
    """BASE with step i's keys replaced (a value of DELETE removes the key)."""
    plan = base()
    step = plan["steps"][i]
    for key, value in changes.items():
        if value is DELETE:
            step.pop(key, None)
        else:
            step[key] = value
    return plan


def with_config(i: int, **changes: Any) -> dict[str, Any]:
    """BASE with step i's config keys replaced (a value of DELETE removes the key)."""
    plan = base()
    config = plan["steps"][i]["config"]
    for key, value in changes.items():
        if value is DELETE:
            config.pop(key, None)
        else:
            config[key] = value
    return plan


def with_transform(config: dict[str, Any]) -> dict[str, Any]:
    """BASE with the transform step's config replaced."""
    return with_step(1, config=config)


def only_error(plan: Any, field: str, fragment: str) -> None:
    errors = validate_plan(plan)
    assert len(errors) == 1, errors
    assert errors[0].field == field, errors
    assert fragment in errors[0].message, errors


def has_error(plan: Any, field: str, fragment: str) -> None:
    errors = validate_plan(plan)
    assert any(e.field == field and fragment in e.message for e in errors), errors


def ingest_chain(n: int) -> dict[str, Any]:
    """A valid plan of n steps: one ingest and a chain of transforms."""
    steps = [{"name": "s0", "type": "ingest", "config": {"source": "table", "table": "t"}}]
    for i in range(1, n):
        steps.append(
            {
                "name": f"s{i}",
                "type": "transform",
                "depends_on": [f"s{i - 1}"],
                "config": {"op": "trim", "columns": ["a"]},
            }
        )
    return {"steps": steps}


def graph(edges: dict[str, list[str]]) -> dict[str, Any]:
    """A plan from name -> deps; steps without deps are ingests, the rest transforms."""
    steps = []
    for name, deps in edges.items():
        if deps:
            steps.append(
                {
                    "name": name,
                    "type": "transform",
                    "depends_on": deps,
                    "config": {"op": "parse_date", "column": "d"},
                }
            )
        else:
            steps.append(
                {"name": name, "type": "ingest", "config": {"source": "table", "table": "t"}}
            )
    return {"steps": steps}
