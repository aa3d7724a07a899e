"""The DAGs the readiness tests decide on: plans from edges, the sample DAG and its states.

Hypothesis settings: max_examples=200, deadline=None (see SETTINGS)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, settings

from dag.plan import Plan, parse_plan
from dag.readiness import (
    Readiness,
)

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
STOP = "stop_dependents"
CONTINUE = "continue_independent"


def make_plan(edges: Mapping[str, list[str]], on_failure: str = STOP) -> Plan:
    """A plan from name -> deps: steps without deps are ingests, the rest transforms."""
    steps: list[dict[str, Any]] = []
    for name, deps in edges.items():
        if deps:
            config = {"op": "trim", "columns": ["a"]}
            steps.append({"name": name, "type": "transform", "depends_on": deps, "config": config})
        else:
            config = {"source": "table", "table": "t"}
            steps.append({"name": name, "type": "ingest", "config": config})
    return parse_plan({"on_failure": on_failure, "steps": steps})


# read -> clean -> {to_table, to_file};  other -> other_out (independent branch)
EDGES = {
    "read": [],
    "clean": ["read"],
    "to_table": ["clean"],
    "to_file": ["clean"],
    "other": [],
    "other_out": ["other"],
}


def states(**given: str) -> dict[str, str]:
    """Every EDGES step pending unless given."""
    return {name: given.get(name, "pending") for name in EDGES}


def apply(states_: Mapping[str, str], decision: Readiness) -> dict[str, str]:
    return {**states_, **decision.transitions()}
