"""Cycles (dag.cycles) and the execution order (dag.plan.topological_order)."""

from __future__ import annotations

import pytest

from dag.errors import PlanInvalid
from dag.plan import (
    FieldError,
    Plan,
    Step,
    parse_plan,
    topological_order,
    validate_plan,
)
from tests.unit.dag.plans import (
    base,
    graph,
    ingest_chain,
)

# --- cycles --------------------------------------------------------------------------------------


def test_cycle_reported_once_in_order() -> None:
    plan = graph({"read": [], "a": ["read", "b"], "b": ["c"], "c": ["a"]})
    errors = validate_plan(plan)
    assert errors == [FieldError("plan.steps[1].depends_on", "cycle: a -> b -> c -> a")]


def test_two_step_cycle() -> None:
    plan = graph({"read": [], "x": ["y"], "y": ["x"]})
    assert validate_plan(plan) == [FieldError("plan.steps[1].depends_on", "cycle: x -> y -> x")]


def test_cycle_starts_at_first_step_in_plan_order() -> None:
    plan = graph({"read": [], "c": ["a"], "b": ["c"], "a": ["b", "read"]})
    assert validate_plan(plan) == [
        FieldError("plan.steps[1].depends_on", "cycle: c -> a -> b -> c")
    ]


def test_disjoint_cycles_each_reported() -> None:
    plan = graph({"read": [], "a": ["b"], "b": ["a"], "x": ["y", "read"], "y": ["x"]})
    assert validate_plan(plan) == [
        FieldError("plan.steps[1].depends_on", "cycle: a -> b -> a"),
        FieldError("plan.steps[3].depends_on", "cycle: x -> y -> x"),
    ]


def test_tangled_cycles_reported_once_with_the_shortest_cycle() -> None:
    # One strongly connected component {a, b, c}: one error, naming a real cycle.
    plan = graph({"read": [], "a": ["b", "read"], "b": ["c", "a"], "c": ["a"]})
    assert validate_plan(plan) == [FieldError("plan.steps[1].depends_on", "cycle: a -> b -> a")]


def test_self_dependency_is_not_also_a_cycle() -> None:
    plan = graph({"read": [], "a": ["read", "a"]})
    assert validate_plan(plan) == [
        FieldError("plan.steps[1].depends_on[1]", "a step cannot depend on itself")
    ]


def test_long_cycle_does_not_exhaust_recursion() -> None:
    plan = ingest_chain(3000)
    plan["steps"][1]["depends_on"].append("s2999")
    errors = validate_plan(plan)
    assert errors[0] == FieldError("plan.steps", "must have 1 to 30 steps, got 3000")
    assert len(errors) == 2
    assert errors[1].field == "plan.steps[1].depends_on"
    assert errors[1].message.startswith("cycle: s1 -> s2999 -> s2998")
    assert errors[1].message.endswith("s2 -> s1")


# --- topological_order ---------------------------------------------------------------------------


def test_topological_order_keeps_plan_order_among_ties() -> None:
    plan = parse_plan(graph({"r2": [], "r1": [], "b": ["r1"], "a": ["r2"], "j": ["a", "b"]}))
    assert topological_order(plan) == ["r2", "r1", "b", "a", "j"]


def test_topological_order_reorders_a_reversed_plan() -> None:
    plan = base()
    plan["steps"].reverse()
    assert topological_order(parse_plan(plan)) == ["read", "clean", "to_file", "to_table"]


def test_topological_order_rejects_a_hand_built_cycle() -> None:
    plan = Plan(
        steps=(
            Step("a", "transform", {}, ("b",)),
            Step("b", "transform", {}, ("a",)),
        )
    )
    with pytest.raises(PlanInvalid) as info:
        topological_order(plan)
    assert info.value.errors == [FieldError("plan.steps", "cycle: a -> b -> a")]


def test_topological_order_rejects_a_hand_built_unknown_dependency() -> None:
    plan = Plan(steps=(Step("a", "transform", {}, ("ghost",)),))
    with pytest.raises(PlanInvalid, match="unknown step 'ghost'"):
        topological_order(plan)
