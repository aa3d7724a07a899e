"""Plan validation, parsing and ordering (dag.plan).

Hypothesis settings: max_examples=200, deadline=None (see SETTINGS).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dag.errors import PlanInvalid
from dag.plan import (
    COLUMN_TYPES,
    EXPORT_TABLE_RE,
    INT64_MAX,
    INT64_MIN,
    FieldError,
    Plan,
    Step,
    parse_plan,
    topological_order,
    validate_plan,
)

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DELETE = object()  # marks a key to remove in with_step / with_config
PLANS_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "plans"

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


# --- the baseline ----------------------------------------------------------------------------


def test_contract_plan_is_valid() -> None:
    assert validate_plan(base()) == []


def test_field_error_as_dict() -> None:
    assert FieldError("plan.steps", "x").as_dict() == {"field": "plan.steps", "message": "x"}


# --- plan level --------------------------------------------------------------------------------


@pytest.mark.parametrize("obj", [None, [], "plan", 3, True])
def test_plan_must_be_an_object(obj: Any) -> None:
    only_error(obj, "plan", "must be an object")


def test_steps_required() -> None:
    plan = base()
    del plan["steps"]
    only_error(plan, "plan.steps", "is required")


@pytest.mark.parametrize("steps", [{}, "read", None, 3])
def test_steps_must_be_a_list(steps: Any) -> None:
    only_error({"steps": steps}, "plan.steps", "must be a list")


def test_zero_steps() -> None:
    only_error({"steps": []}, "plan.steps", "must have 1 to 30 steps, got 0")


def test_thirty_one_steps() -> None:
    only_error(ingest_chain(31), "plan.steps", "must have 1 to 30 steps, got 31")


@pytest.mark.parametrize("n", [1, 30])
def test_one_and_thirty_steps_are_valid(n: int) -> None:
    assert validate_plan(ingest_chain(n)) == []


def test_too_many_steps_still_checks_each_step() -> None:
    plan = ingest_chain(31)
    plan["steps"][5]["type"] = "load"
    errors = validate_plan(plan)
    assert [e.field for e in errors] == ["plan.steps", "plan.steps[5].type"]


@pytest.mark.parametrize("key", ["on_failure", "on_row_error"])
@pytest.mark.parametrize("value", ["stop_everything", "", 1, None, ["stop"]])
def test_policy_values(key: str, value: Any) -> None:
    plan = base()
    plan[key] = value
    only_error(plan, f"plan.{key}", "must be one of")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("on_failure", "stop_dependents"),
        ("on_failure", "continue_independent"),
        ("on_row_error", "stop"),
        ("on_row_error", "reject"),
    ],
)
def test_policy_values_accepted(key: str, value: str) -> None:
    plan = base()
    plan[key] = value
    assert validate_plan(plan) == []


def test_unknown_top_level_key() -> None:
    plan = base()
    plan["colour"] = "blue"
    only_error(plan, "plan.colour", "unknown key")


# --- step shape --------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["to_file", None, 3, ["to_file"]])
def test_step_must_be_an_object(raw: Any) -> None:
    plan = base()
    plan["steps"][3] = raw
    only_error(plan, "plan.steps[3]", "must be an object")


def test_unknown_step_key() -> None:
    only_error(with_step(3, timeout=5), "plan.steps[3].timeout", "unknown key")


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        (DELETE, "is required"),
        (None, "must be a string"),
        (7, "must be a string"),
        ("", "must not be empty"),
        ("to file", "must be 1-63 characters"),
        ("../etc", "must be 1-63 characters"),
        (".hidden", "must be 1-63 characters"),
        ("-dash", "must be 1-63 characters"),
        ("a/b", "must be 1-63 characters"),
        ("a" * 64, "must be 1-63 characters"),
        ("trailing\n", "must be 1-63 characters"),
        ("\u00e9t\u00e9", "must be 1-63 characters"),
    ],
)
def test_step_name_rules(name: Any, fragment: str) -> None:
    only_error(with_step(3, name=name), "plan.steps[3].name", fragment)


@pytest.mark.parametrize("name", ["a", "_", "0", "a" * 63, "load.v2-final", "Step_1"])
def test_step_name_accepted(name: str) -> None:
    assert validate_plan(with_step(3, name=name)) == []


def test_duplicate_name_reported_at_later_index() -> None:
    only_error(
        with_step(3, name="to_table"),
        "plan.steps[3].name",
        "duplicate step name 'to_table' (first at plan.steps[2])",
    )


@pytest.mark.parametrize(
    ("step_type", "fragment"),
    [(DELETE, "is required"), ("load", "must be one of"), (None, "must be one of")],
)
def test_step_type_rules(step_type: Any, fragment: str) -> None:
    only_error(with_step(3, type=step_type), "plan.steps[3].type", fragment)


def test_config_not_checked_when_type_unknown() -> None:
    only_error(
        with_step(3, type="load", config={"anything": 1}), "plan.steps[3].type", "must be one of"
    )


@pytest.mark.parametrize(
    ("config", "fragment"), [(DELETE, "is required"), ([], "must be an object")]
)
def test_step_config_rules(config: Any, fragment: str) -> None:
    only_error(with_step(3, config=config), "plan.steps[3].config", fragment)


# --- depends_on ----------------------------------------------------------------------------------


@pytest.mark.parametrize("deps", ["clean", {"clean": 1}, None])
def test_depends_on_must_be_a_list(deps: Any) -> None:
    only_error(with_step(3, depends_on=deps), "plan.steps[3].depends_on", "must be a list")


def test_dependency_must_be_a_string() -> None:
    only_error(
        with_step(3, depends_on=["clean", 4]), "plan.steps[3].depends_on[1]", "must be a step name"
    )


def test_unknown_dependency_names_the_step() -> None:
    only_error(
        with_step(2, depends_on=["nowhere"]),
        "plan.steps[2].depends_on[0]",
        "unknown step 'nowhere'",
    )


def test_duplicate_dependency() -> None:
    only_error(
        with_step(2, depends_on=["clean", "clean"]),
        "plan.steps[2].depends_on[1]",
        "duplicate dependency 'clean'",
    )


def test_self_dependency() -> None:
    only_error(
        with_step(2, depends_on=["clean", "to_table"]),
        "plan.steps[2].depends_on[1]",
        "cannot depend on itself",
    )


def test_dependency_may_name_a_later_step() -> None:
    plan = base()
    plan["steps"].reverse()
    assert validate_plan(plan) == []


def test_ingest_has_no_dependencies() -> None:
    plan = base()
    plan["steps"].append(
        {"name": "other", "type": "ingest", "config": {"source": "table", "table": "x"}}
    )
    plan["steps"][0]["depends_on"] = ["other"]
    only_error(plan, "plan.steps[0].depends_on", "an ingest step has no dependencies")


def test_ingest_with_empty_depends_on_is_fine() -> None:
    assert validate_plan(with_step(0, depends_on=[])) == []


@pytest.mark.parametrize(("i", "kind"), [(1, "transform"), (3, "export")])
@pytest.mark.parametrize("deps", [DELETE, []])
def test_transform_and_export_need_a_dependency(i: int, kind: str, deps: Any) -> None:
    # Only the step loses its input; its dependents keep theirs, so there is one error.
    only_error(
        with_step(i, depends_on=deps),
        f"plan.steps[{i}].depends_on",
        f"a {kind} step needs at least one dependency",
    )


# --- cycles --------------------------------------------------------------------------------------


def _graph(edges: dict[str, list[str]]) -> dict[str, Any]:
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


def test_cycle_reported_once_in_order() -> None:
    plan = _graph({"read": [], "a": ["read", "b"], "b": ["c"], "c": ["a"]})
    errors = validate_plan(plan)
    assert errors == [FieldError("plan.steps[1].depends_on", "cycle: a -> b -> c -> a")]


def test_two_step_cycle() -> None:
    plan = _graph({"read": [], "x": ["y"], "y": ["x"]})
    assert validate_plan(plan) == [FieldError("plan.steps[1].depends_on", "cycle: x -> y -> x")]


def test_cycle_starts_at_first_step_in_plan_order() -> None:
    plan = _graph({"read": [], "c": ["a"], "b": ["c"], "a": ["b", "read"]})
    assert validate_plan(plan) == [
        FieldError("plan.steps[1].depends_on", "cycle: c -> a -> b -> c")
    ]


def test_disjoint_cycles_each_reported() -> None:
    plan = _graph({"read": [], "a": ["b"], "b": ["a"], "x": ["y", "read"], "y": ["x"]})
    assert validate_plan(plan) == [
        FieldError("plan.steps[1].depends_on", "cycle: a -> b -> a"),
        FieldError("plan.steps[3].depends_on", "cycle: x -> y -> x"),
    ]


def test_tangled_cycles_reported_once_with_the_shortest_cycle() -> None:
    # One strongly connected component {a, b, c}: one error, naming a real cycle.
    plan = _graph({"read": [], "a": ["b", "read"], "b": ["c", "a"], "c": ["a"]})
    assert validate_plan(plan) == [FieldError("plan.steps[1].depends_on", "cycle: a -> b -> a")]


def test_self_dependency_is_not_also_a_cycle() -> None:
    plan = _graph({"read": [], "a": ["read", "a"]})
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


# --- retry ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("retry", [3, [], "3", None])
def test_retry_must_be_an_object(retry: Any) -> None:
    only_error(with_step(1, retry=retry), "plan.steps[1].retry", "must be an object")


@pytest.mark.parametrize("attempts", [0, 4, -1, True, False, 2.0, "3", None])
def test_max_attempts_range(attempts: Any) -> None:
    only_error(
        with_step(1, retry={"max_attempts": attempts}),
        "plan.steps[1].retry.max_attempts",
        "must be an integer from 1 to 3",
    )


def test_retry_unknown_key() -> None:
    only_error(
        with_step(1, retry={"max_attempts": 2, "delay_s": 5}),
        "plan.steps[1].retry.delay_s",
        "unknown key",
    )


@pytest.mark.parametrize(("retry", "expected"), [({"max_attempts": 1}, 1), ({}, 3), (DELETE, 3)])
def test_max_attempts_parsed(retry: Any, expected: int) -> None:
    assert parse_plan(with_step(1, retry=retry)).step("clean").max_attempts == expected


# --- ingest config -------------------------------------------------------------------------------

C0 = "plan.steps[0].config"


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"source": DELETE}, f"{C0}.source", "is required"),
        ({"source": "s3"}, f"{C0}.source", "must be one of 'file', 'table'"),
        ({"path": DELETE}, f"{C0}.path", "is required"),
        ({"path": ""}, f"{C0}.path", "must not be empty"),
        ({"path": 5}, f"{C0}.path", "must be a string"),
        ({"path": "/etc/passwd"}, f"{C0}.path", "must be a relative path"),
        ({"path": "\\\\server\\share\\x.csv"}, f"{C0}.path", "must be a relative path"),
        ({"path": "C:\\data\\x.csv"}, f"{C0}.path", "must be a relative path"),
        ({"path": "../secrets.csv"}, f"{C0}.path", "must not contain '..'"),
        ({"path": "a/../../x.csv"}, f"{C0}.path", "must not contain '..'"),
        ({"path": "a\\..\\x.csv"}, f"{C0}.path", "must not contain '..'"),
        ({"path": "data/"}, f"{C0}.path", "must name a file"),
        ({"path": "x\x00.csv"}, f"{C0}.path", "NUL"),
        ({"format": "xml"}, f"{C0}.format", "must be one of 'csv', 'json', 'jsonl'"),
        ({"format": None}, f"{C0}.format", "must be one of"),
        ({"columns": ["id"]}, f"{C0}.columns", "must be an object"),
        ({"columns": {"id": "integer"}}, f"{C0}.columns.id", "type must be one of"),
        ({"columns": {"id": None}}, f"{C0}.columns.id", "type must be one of"),
        ({"columns": {"": "int"}}, f"{C0}.columns.", "non-empty"),
        ({"delimiter": ""}, f"{C0}.delimiter", "single character"),
        ({"delimiter": ";;"}, f"{C0}.delimiter", "single character"),
        ({"delimiter": 44}, f"{C0}.delimiter", "single character"),
        ({"delimiter": '"'}, f"{C0}.delimiter", "cannot be a quote"),
        ({"delimiter": "\n"}, f"{C0}.delimiter", "cannot be a quote"),
        ({"delimiter": "\r"}, f"{C0}.delimiter", "cannot be a quote"),
        ({"format": "json", "delimiter": ";"}, f"{C0}.delimiter", "only applies to the csv"),
        ({"format": "jsonl", "delimiter": ","}, f"{C0}.delimiter", "only applies to the csv"),
        ({"table": "x"}, f"{C0}.table", "unknown key"),
    ],
)
def test_ingest_file_config(changes: dict[str, Any], field: str, fragment: str) -> None:
    only_error(with_config(0, **changes), field, fragment)


@pytest.mark.parametrize(
    "changes",
    [
        {"delimiter": ";"},
        {"delimiter": "\t"},
        {"delimiter": "|"},
        {"format": "json"},
        {"format": "jsonl", "columns": {}},
        {"format": DELETE, "columns": DELETE},
        {"path": "sub/dir/customers.csv"},
        {"path": "./customers.csv"},
        {"path": "a..b.csv"},
        {"columns": {"id": "int", "name": "string", "d": "date", "with space": "string"}},
    ],
)
def test_ingest_file_config_accepted(changes: dict[str, Any]) -> None:
    assert validate_plan(with_config(0, **changes)) == []


@pytest.mark.parametrize(
    ("config", "field", "fragment"),
    [
        ({"source": "table"}, f"{C0}.table", "is required"),
        ({"source": "table", "table": ""}, f"{C0}.table", "must not be empty"),
        ({"source": "table", "table": ["t"]}, f"{C0}.table", "must be a string"),
        ({"source": "table", "table": "t", "path": "x.csv"}, f"{C0}.path", "unknown key"),
    ],
)
def test_ingest_table_config(config: dict[str, Any], field: str, fragment: str) -> None:
    only_error(with_step(0, config=config), field, fragment)


def test_ingest_table_config_accepted() -> None:
    assert validate_plan(with_step(0, config={"source": "table", "table": "people"})) == []


# --- transform config ----------------------------------------------------------------------------

C1 = "plan.steps[1].config"


@pytest.mark.parametrize(
    ("config", "field", "fragment"),
    [
        ({"columns": ["a"]}, f"{C1}.op", "is required"),
        ({"op": "explode"}, f"{C1}.op", "unknown op 'explode'"),
        ({"op": None}, f"{C1}.op", "unknown op None"),
        ({"op": ["trim"]}, f"{C1}.op", "unknown op"),
        # trim / normalize_whitespace
        ({"op": "trim"}, f"{C1}.columns", "is required"),
        ({"op": "trim", "columns": "name"}, f"{C1}.columns", "must be a list"),
        ({"op": "trim", "columns": []}, f"{C1}.columns", "at least one column"),
        ({"op": "trim", "columns": ["a", 3]}, f"{C1}.columns[1]", "non-empty string"),
        ({"op": "trim", "columns": [""]}, f"{C1}.columns[0]", "non-empty string"),
        ({"op": "trim", "columns": ["a", "b", "a"]}, f"{C1}.columns[2]", "duplicate column 'a'"),
        ({"op": "trim", "columns": ["a"], "column": "a"}, f"{C1}.column", "unknown key"),
        ({"op": "normalize_whitespace", "columns": []}, f"{C1}.columns", "at least one"),
        (
            {"op": "normalize_whitespace", "columns": ["x", "x"]},
            f"{C1}.columns[1]",
            "duplicate",
        ),
        # map
        ({"op": "map", "mapping": {}}, f"{C1}.column", "is required"),
        ({"op": "map", "column": "", "mapping": {}}, f"{C1}.column", "must not be empty"),
        ({"op": "map", "column": 1, "mapping": {}}, f"{C1}.column", "must be a string"),
        ({"op": "map", "column": "s"}, f"{C1}.mapping", "is required"),
        ({"op": "map", "column": "s", "mapping": [["A", "B"]]}, f"{C1}.mapping", "object"),
        (
            {"op": "map", "column": "s", "mapping": {"A": True}},
            f"{C1}.mapping.A",
            "must be a string, an integer or null",
        ),
        ({"op": "map", "column": "s", "mapping": {"A": 1.5}}, f"{C1}.mapping.A", "string"),
        ({"op": "map", "column": "s", "mapping": {"A": ["x"]}}, f"{C1}.mapping.A", "string"),
        ({"op": "map", "column": "s", "mapping": {"A": 2**63}}, f"{C1}.mapping.A", "int64"),
        ({"op": "map", "column": "s", "mapping": {}, "into": ""}, f"{C1}.into", "not be empty"),
        ({"op": "map", "column": "s", "mapping": {}, "into": 3}, f"{C1}.into", "be a string"),
        ({"op": "map", "column": "s", "mapping": {}, "default": False}, f"{C1}.default", "null"),
        ({"op": "map", "column": "s", "mapping": {}, "default": {}}, f"{C1}.default", "null"),
        ({"op": "map", "column": "s", "mapping": {}, "columns": ["s"]}, f"{C1}.columns", "unknown"),
        # filter_eq
        ({"op": "filter_eq", "value": 1}, f"{C1}.column", "is required"),
        ({"op": "filter_eq", "column": "s"}, f"{C1}.value", "is required"),
        ({"op": "filter_eq", "column": "s", "value": True}, f"{C1}.value", "integer or null"),
        ({"op": "filter_eq", "column": "s", "value": 1.0}, f"{C1}.value", "integer or null"),
        ({"op": "filter_eq", "column": "s", "value": {"a": 1}}, f"{C1}.value", "integer or null"),
        ({"op": "filter_eq", "column": "s", "value": [1]}, f"{C1}.value", "integer or null"),
        ({"op": "filter_eq", "column": "s", "value": 2**63}, f"{C1}.value", "int64"),
        ({"op": "filter_eq", "column": "s", "value": -(2**63) - 1}, f"{C1}.value", "int64"),
        # parse_date
        ({"op": "parse_date"}, f"{C1}.column", "is required"),
        ({"op": "parse_date", "column": "d", "format": "%Y"}, f"{C1}.format", "unknown key"),
        # aggregate
        ({"op": "aggregate"}, f"{C1}.column", "is required"),
        ({"op": "aggregate", "column": "n", "group_by": "c"}, f"{C1}.group_by", "must be a list"),
        ({"op": "aggregate", "column": "n", "group_by": [1]}, f"{C1}.group_by[0]", "non-empty"),
        (
            {"op": "aggregate", "column": "n", "group_by": ["c", "c"]},
            f"{C1}.group_by[1]",
            "duplicate column 'c'",
        ),
        (
            {"op": "aggregate", "column": "n", "group_by": ["c", "sum"]},
            f"{C1}.group_by[1]",
            "clashes with an aggregate output column",
        ),
        ({"op": "aggregate", "column": "n", "fn": "sum"}, f"{C1}.fn", "unknown key"),
    ],
)
def test_transform_config(config: dict[str, Any], field: str, fragment: str) -> None:
    only_error(with_transform(config), field, fragment)


@pytest.mark.parametrize(
    "config",
    [
        {"op": "trim", "columns": ["a", "b"]},
        {"op": "normalize_whitespace", "columns": ["name"]},
        {"op": "map", "column": "s", "mapping": {}},
        {"op": "map", "column": "s", "mapping": {"A": "x", "B": 1, "C": None}, "into": "t"},
        {"op": "map", "column": "s", "mapping": {"A": "x"}, "default": None},
        {"op": "map", "column": "s", "mapping": {"A": "x"}, "default": 0},
        {"op": "filter_eq", "column": "s", "value": None},
        {"op": "filter_eq", "column": "s", "value": ""},
        {"op": "filter_eq", "column": "s", "value": INT64_MIN},
        {"op": "filter_eq", "column": "s", "value": INT64_MAX},
        {"op": "parse_date", "column": "d"},
        {"op": "aggregate", "column": "n"},
        {"op": "aggregate", "column": "n", "group_by": []},
        {"op": "aggregate", "column": "n", "group_by": ["country", "status"]},
    ],
)
def test_transform_config_accepted(config: dict[str, Any]) -> None:
    assert validate_plan(with_transform(config)) == []


# --- export config -------------------------------------------------------------------------------

C2 = "plan.steps[2].config"
C3 = "plan.steps[3].config"


@pytest.mark.parametrize(
    ("i", "config", "field", "fragment"),
    [
        (3, {"path": "x.jsonl"}, f"{C3}.target", "is required"),
        (3, {"target": "s3", "path": "x"}, f"{C3}.target", "must be one of 'file', 'table'"),
        (3, {"target": "file"}, f"{C3}.path", "is required"),
        (3, {"target": "file", "path": "/tmp/x.jsonl"}, f"{C3}.path", "relative"),
        (3, {"target": "file", "path": "../x.jsonl"}, f"{C3}.path", "'..'"),
        (3, {"target": "file", "path": "out/.."}, f"{C3}.path", "'..'"),
        (3, {"target": "file", "path": ""}, f"{C3}.path", "must not be empty"),
        (3, {"target": "file", "path": "x", "format": "parquet"}, f"{C3}.format", "one of"),
        (3, {"target": "file", "path": "x", "format": "json"}, f"{C3}.format", "one of"),
        (3, {"target": "file", "path": "x", "key": "id"}, f"{C3}.key", "unknown key"),
        (2, {"target": "table"}, f"{C2}.table", "is required"),
        (2, {"target": "table", "table": ""}, f"{C2}.table", "must not be empty"),
        (2, {"target": "table", "table": 1}, f"{C2}.table", "must be a string"),
        (2, {"target": "table", "table": "Customers"}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "1st"}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "a-b"}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "a.b"}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "t\n"}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "a" * 64}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "t", "key": ""}, f"{C2}.key", "must not be empty"),
        (2, {"target": "table", "table": "t", "key": ["id"]}, f"{C2}.key", "must be a string"),
        (2, {"target": "table", "table": "t", "path": "x"}, f"{C2}.path", "unknown key"),
    ],
)
def test_export_config(i: int, config: dict[str, Any], field: str, fragment: str) -> None:
    only_error(with_step(i, config=config), field, fragment)


@pytest.mark.parametrize(
    ("i", "config"),
    [
        (3, {"target": "file", "path": "x.csv", "format": "csv"}),
        (3, {"target": "file", "path": "nested/x.jsonl"}),
        (2, {"target": "table", "table": "_t0"}),
        (2, {"target": "table", "table": "a" * 63, "key": "id"}),
    ],
)
def test_export_config_accepted(i: int, config: dict[str, Any]) -> None:
    assert validate_plan(with_step(i, config=config)) == []


# --- many errors at once -------------------------------------------------------------------------


def test_all_errors_collected_in_document_order() -> None:
    plan = base()
    plan["on_failure"] = "halt"
    plan["steps"][0]["config"]["path"] = "/abs.csv"
    plan["steps"][1]["config"] = {"op": "trim", "columns": []}
    plan["steps"][1]["retry"] = {"max_attempts": 9}
    plan["steps"][2]["depends_on"] = ["nowhere"]
    plan["steps"][3]["name"] = "to_table"
    plan["steps"][3]["config"]["format"] = "xml"
    assert [e.field for e in validate_plan(plan)] == [
        "plan.on_failure",
        "plan.steps[0].config.path",
        "plan.steps[1].retry.max_attempts",
        "plan.steps[1].config.columns",
        "plan.steps[2].depends_on[0]",
        "plan.steps[3].name",
        "plan.steps[3].config.format",
    ]


def test_several_errors_in_one_step() -> None:
    plan = with_step(3, name="", type="exp", depends_on=[1], extra=True)
    fields = {e.field for e in validate_plan(plan)}
    assert fields == {
        "plan.steps[3].extra",
        "plan.steps[3].name",
        "plan.steps[3].type",
        "plan.steps[3].depends_on[0]",
    }


# --- parse_plan ----------------------------------------------------------------------------------


def test_parse_plan_raises_with_every_error() -> None:
    plan = with_step(2, depends_on=["nowhere"])
    plan["on_row_error"] = "skip"
    with pytest.raises(PlanInvalid) as info:
        parse_plan(plan)
    assert info.value.errors == validate_plan(plan)
    assert len(info.value.errors) == 2
    assert "plan.steps[2].depends_on[0]: unknown step 'nowhere'" in str(info.value)


def test_parse_plan_fills_defaults() -> None:
    plan = {
        "steps": [
            {"name": "read", "type": "ingest", "config": {"source": "file", "path": "c.csv"}},
            {
                "name": "out",
                "type": "export",
                "depends_on": ["read"],
                "config": {"target": "file", "path": "c.jsonl"},
            },
        ]
    }
    parsed = parse_plan(plan)
    assert parsed.on_failure == "stop_dependents"
    assert parsed.on_row_error == "stop"
    read = parsed.step("read")
    assert read == Step(
        name="read",
        type="ingest",
        config={
            "source": "file",
            "path": "c.csv",
            "format": "csv",
            "columns": {},
            "delimiter": ",",
        },
        depends_on=(),
        max_attempts=3,
    )
    assert parsed.step("out").config == {"target": "file", "path": "c.jsonl", "format": "jsonl"}
    assert parsed.step("out").depends_on == ("read",)


def test_parse_plan_adds_no_undocumented_defaults() -> None:
    plan = with_transform({"op": "map", "column": "s", "mapping": {"A": "a"}})
    plan["steps"][0]["config"] = {"source": "table", "table": "t"}
    plan["steps"][2]["config"] = {"target": "table", "table": "t"}
    parsed = parse_plan(plan)
    assert parsed.step("read").config == {"source": "table", "table": "t"}
    # `into` and `default` change what map does when absent, so they stay absent.
    assert parsed.step("clean").config == {"op": "map", "column": "s", "mapping": {"A": "a"}}
    assert parsed.step("to_table").config == {"target": "table", "table": "t"}


def test_parse_plan_no_delimiter_default_for_json() -> None:
    parsed = parse_plan(with_config(0, format="jsonl"))
    assert parsed.step("read").config["format"] == "jsonl"
    assert "delimiter" not in parsed.step("read").config


def test_parse_plan_copies_config() -> None:
    plan = base()
    parsed = parse_plan(plan)
    plan["steps"][0]["config"]["columns"]["id"] = "string"
    plan["steps"][1]["config"]["columns"].append("x")
    assert parsed.step("read").config["columns"]["id"] == "int"
    assert parsed.step("clean").config["columns"] == ["name"]


def test_plan_and_step_are_frozen_and_hashable() -> None:
    parsed = parse_plan(base())
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.on_failure = "continue_independent"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.steps[0].name = "x"  # type: ignore[misc]
    assert hash(parsed) == hash(parse_plan(base()))
    assert parsed == parse_plan(base())


def test_plan_helpers() -> None:
    plan = parse_plan(
        _graph(
            {"read": [], "a": ["read"], "b": ["a"], "c": ["read", "b"], "d": ["read"], "e": ["d"]}
        )
    )
    assert plan.step_names == ("read", "a", "b", "c", "d", "e")
    assert plan.step("b").depends_on == ("a",)
    assert plan.dependents("read") == ("a", "c", "d")
    assert plan.dependents("c") == ()
    assert plan.descendants("a") == ("b", "c")
    assert plan.descendants("read") == ("a", "b", "c", "d", "e")
    assert plan.descendants("e") == ()
    for call in (plan.step, plan.dependents, plan.descendants):
        with pytest.raises(KeyError, match="nowhere"):
            call("nowhere")


def test_as_dict_round_trips_through_json() -> None:
    plan = parse_plan(base())
    assert parse_plan(json.loads(json.dumps(plan.as_dict()))) == plan


# --- topological_order ---------------------------------------------------------------------------


def test_topological_order_keeps_plan_order_among_ties() -> None:
    plan = parse_plan(_graph({"r2": [], "r1": [], "b": ["r1"], "a": ["r2"], "j": ["a", "b"]}))
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


# --- fixtures ------------------------------------------------------------------------------------


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((PLANS_DIR / name).read_text())


@pytest.mark.parametrize("name", ["customers.json", "demo.json"])
def test_sample_plans_are_valid(name: str) -> None:
    doc = _fixture(name)
    assert set(doc) == {"name", "plan"}
    assert validate_plan(doc["plan"]) == []


def test_customers_fixture_is_the_contract_plan() -> None:
    assert _fixture("customers.json") == {"name": "customers", "plan": BASE}


def test_demo_fixture_shape() -> None:
    plan = parse_plan(_fixture("demo.json")["plan"])
    ops = {s.config.get("op") for s in plan.steps if s.type == "transform"}
    assert {"normalize_whitespace", "map", "filter_eq", "aggregate"} <= ops
    exports = [s for s in plan.steps if s.type == "export"]
    targets = [(s.config["target"], s.config.get("format")) for s in exports]
    assert ("table", None) in targets and ("file", "jsonl") in targets
    assert any(s.config.get("group_by") for s in plan.steps)
    read = next(s for s in plan.steps if s.type == "ingest")
    assert read.config["path"] == "customers.csv"
    assert set(read.config["columns"]) <= {"id", "name", "amount", "signup", "status", "country"}


def test_invalid_cycle_fixture() -> None:
    errors = validate_plan(_fixture("invalid_cycle.json")["plan"])
    assert errors == [
        FieldError("plan.steps[1].depends_on", "cycle: clean -> enrich -> label -> clean")
    ]


def test_invalid_many_fixture() -> None:
    errors = validate_plan(_fixture("invalid_many.json")["plan"])
    got = [(e.field, e.message) for e in errors]
    expected = [
        ("plan.colour", "unknown key"),
        ("plan.on_failure", "must be one of"),
        ("plan.steps[0].config.path", "'..'"),
        ("plan.steps[0].config.format", "must be one of"),
        ("plan.steps[0].config.columns.id", "type must be one of"),
        ("plan.steps[1].retry.max_attempts", "from 1 to 3"),
        ("plan.steps[1].depends_on[1]", "unknown step 'nowhere'"),
        ("plan.steps[1].config.op", "unknown op 'explode'"),
        ("plan.steps[2].name", "duplicate step name 'clean'"),
        ("plan.steps[2].config.table", "lowercase"),
        ("plan.steps[3].type", "must be one of"),
        ("plan.steps[4].timeout", "unknown key"),
        ("plan.steps[4].depends_on", "needs at least one dependency"),
        ("plan.steps[4].config.format", "must be one of"),
    ]
    assert len(got) == len(expected), got
    for (field, message), (want_field, fragment) in zip(got, expected, strict=True):
        assert field == want_field and fragment in message, (field, message)


# --- properties ----------------------------------------------------------------------------------

STEP_NAMES = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}", fullmatch=True)
COLUMN = st.text(min_size=1, max_size=8)
LITERAL = st.one_of(st.none(), st.text(max_size=8), st.integers(INT64_MIN, INT64_MAX))
SEGMENT = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,8}", fullmatch=True)
REL_PATH = st.lists(SEGMENT, min_size=1, max_size=3).map("/".join)


@st.composite
def ingest_configs(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"source": "table", "table": draw(st.text(min_size=1, max_size=10))}
    config: dict[str, Any] = {"source": "file", "path": draw(REL_PATH)}
    fmt = draw(st.sampled_from([None, "csv", "json", "jsonl"]))
    if fmt is not None:
        config["format"] = fmt
    if draw(st.booleans()):
        config["columns"] = draw(st.dictionaries(COLUMN, st.sampled_from(COLUMN_TYPES), max_size=4))
    if fmt in (None, "csv") and draw(st.booleans()):
        config["delimiter"] = draw(st.characters(exclude_characters='"\r\n'))
    return config


def _op(op: str, **strategies: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"op": st.just(op), **strategies})


UNIQUE_COLUMNS = st.lists(COLUMN, min_size=1, max_size=4, unique=True)
TRANSFORM_CONFIGS = st.one_of(
    _op("trim", columns=UNIQUE_COLUMNS),
    _op("normalize_whitespace", columns=UNIQUE_COLUMNS),
    st.fixed_dictionaries(
        {"op": st.just("map"), "column": COLUMN, "mapping": st.dictionaries(st.text(), LITERAL)},
        optional={"into": COLUMN, "default": LITERAL},
    ),
    _op("filter_eq", column=COLUMN, value=LITERAL),
    _op("parse_date", column=COLUMN),
    st.fixed_dictionaries(
        {"op": st.just("aggregate"), "column": COLUMN},
        optional={
            "group_by": st.lists(
                COLUMN.filter(lambda c: c not in ("count", "sum", "min", "max")),
                max_size=3,
                unique=True,
            )
        },
    ),
)
EXPORT_CONFIGS = st.one_of(
    st.fixed_dictionaries(
        {"target": st.just("file"), "path": REL_PATH},
        optional={"format": st.sampled_from(["jsonl", "csv"])},
    ),
    st.fixed_dictionaries(
        {"target": st.just("table"), "table": st.from_regex(EXPORT_TABLE_RE, fullmatch=True)},
        optional={"key": COLUMN},
    ),
)


@st.composite
def valid_plans(draw: st.DrawFn, min_steps: int = 1) -> dict[str, Any]:
    """A random valid plan: a DAG of ingest roots and transforms/exports, shuffled."""
    n = draw(st.integers(min_steps, 30))
    names = draw(st.lists(STEP_NAMES, min_size=n, max_size=n, unique=True))
    steps = []
    for i, name in enumerate(names):
        # Step 1 always depends on step 0, so a plan of 2+ steps has at least one edge.
        root = i == 0 or (i > 1 and draw(st.integers(0, 3)) == 0)
        step: dict[str, Any] = {"name": name}
        if root:
            step["type"] = "ingest"
            step["config"] = draw(ingest_configs())
            if draw(st.booleans()):
                step["depends_on"] = []
        else:
            step["type"] = draw(st.sampled_from(["transform", "export"]))
            deps = draw(st.lists(st.sampled_from(names[:i]), min_size=1, max_size=4, unique=True))
            if i == 1:
                deps = [names[0]]
            step["depends_on"] = deps
            configs = TRANSFORM_CONFIGS if step["type"] == "transform" else EXPORT_CONFIGS
            step["config"] = draw(configs)
            if step["config"].get("target") == "file":  # one file per export path
                step["config"]["path"] = f"{i}/{step['config']['path']}"
        if draw(st.booleans()):
            step["retry"] = draw(
                st.fixed_dictionaries({}, optional={"max_attempts": st.integers(1, 3)})
            )
        steps.append(step)
    order = draw(st.permutations(range(n)))
    plan: dict[str, Any] = {"steps": [steps[k] for k in order]}
    if draw(st.booleans()):
        plan["on_failure"] = draw(st.sampled_from(["stop_dependents", "continue_independent"]))
    if draw(st.booleans()):
        plan["on_row_error"] = draw(st.sampled_from(["stop", "reject"]))
    return plan


@SETTINGS
@given(valid_plans())
def test_generated_plan_validates_and_orders_every_edge(plan: dict[str, Any]) -> None:
    assert validate_plan(plan) == []
    parsed = parse_plan(plan)
    order = topological_order(parsed)
    assert sorted(order) == sorted(parsed.step_names)
    position = {name: i for i, name in enumerate(order)}
    for step in parsed.steps:
        for dep in step.depends_on:
            assert position[dep] < position[step.name]
    assert parse_plan(json.loads(json.dumps(parsed.as_dict()))) == parsed


_CYCLE = re.compile(r"cycle: (.+)")


@SETTINGS
@given(valid_plans(min_steps=2), st.data())
def test_injected_back_edge_never_validates(plan: dict[str, Any], data: st.DataObject) -> None:
    parsed = parse_plan(plan)
    with_descendants = [s.name for s in parsed.steps if parsed.descendants(s.name)]
    target = data.draw(st.sampled_from(with_descendants))
    back = data.draw(st.sampled_from(parsed.descendants(target)))
    raw = next(s for s in plan["steps"] if s["name"] == target)
    raw["depends_on"] = [*raw.get("depends_on", []), back]

    errors = validate_plan(plan)
    cycles = [e for e in errors if e.message.startswith("cycle: ")]
    assert len(cycles) == 1, errors
    names = _CYCLE.fullmatch(cycles[0].message).group(1).split(" -> ")  # type: ignore[union-attr]
    assert names[0] == names[-1]
    assert {target, back} <= set(names)
    deps = {s["name"]: s.get("depends_on", []) for s in plan["steps"]}
    for a, b in itertools.pairwise(names):
        assert b in deps[a], (a, b)
    index = {s["name"]: i for i, s in enumerate(plan["steps"])}
    assert cycles[0].field == f"plan.steps[{index[names[0]]}].depends_on"
    assert index[names[0]] == min(index[n] for n in names)
    with pytest.raises(PlanInvalid):
        parse_plan(plan)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)
STEPISH = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(STEP_NAMES, JSON),
        "type": st.one_of(st.sampled_from(["ingest", "transform", "export"]), JSON),
        "depends_on": st.one_of(st.lists(st.sampled_from(["a", "b", "c"])), JSON),
        "config": st.one_of(ingest_configs(), TRANSFORM_CONFIGS, EXPORT_CONFIGS, JSON),
        "retry": JSON,
    },
)


@SETTINGS
@given(st.one_of(JSON, st.fixed_dictionaries({"steps": st.lists(STEPISH, max_size=6)})))
def test_validate_never_raises_and_agrees_with_parse(obj: Any) -> None:
    errors = validate_plan(obj)
    assert all(isinstance(e, FieldError) and e.field.startswith("plan") for e in errors)
    if errors:
        with pytest.raises(PlanInvalid):
            parse_plan(obj)
    else:
        topological_order(parse_plan(obj))


def test_two_file_exports_to_one_path_are_refused() -> None:
    plan = base()
    extra = copy.deepcopy(plan["steps"][3])
    extra["name"] = "to_file_again"
    extra["config"]["path"] = "./" + extra["config"]["path"]
    plan["steps"].append(extra)
    only_error(plan, "plan.steps[4].config.path", "already written by plan.steps[3]")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("out.jsonl", "out.jsonl/x.jsonl"),
        ("./dir//out.csv/deeper/x.jsonl", "dir/out.csv"),
        ("a/b", "a\\b\\c"),
    ],
)
def test_file_exports_colliding_by_prefix_are_refused_with_both_paths(
    first: str, second: str
) -> None:
    # Regression: accepted, then failed at run time on every attempt (a file is no folder).
    plan = base()
    extra = copy.deepcopy(plan["steps"][3])
    extra["name"] = "to_file_again"
    plan["steps"][3]["config"]["path"] = first
    extra["config"]["path"] = second
    plan["steps"].append(extra)
    errors = validate_plan(plan)
    assert [e.field for e in errors] == ["plan.steps[3].config.path", "plan.steps[4].config.path"]
    assert all("is a file" in e.message for e in errors)


def test_sibling_export_paths_sharing_a_name_prefix_are_fine() -> None:
    plan = base()
    extra = copy.deepcopy(plan["steps"][3])
    extra["name"] = "to_file_again"
    plan["steps"][3]["config"]["path"] = "out.jsonl"
    extra["config"]["path"] = "out.jsonl2/x.jsonl"
    plan["steps"].append(extra)
    assert validate_plan(plan) == []


@pytest.mark.parametrize("i", [0, 3])
def test_over_long_path_components_are_refused_at_validation(i: int) -> None:
    # Regression: ENAMETOOLONG at run time was retried three times as if transient.
    for path, fragment in [
        ("d/" + "x" * 256, "at most 255 bytes"),
        ("é" * 128 + ".csv", "at most 255 bytes"),  # 256 bytes in UTF-8
        ("/".join(["x" * 200] * 6), "at most 1024 bytes"),
    ]:
        plan = base()
        plan["steps"][i]["config"]["path"] = path
        only_error(plan, f"plan.steps[{i}].config.path", fragment)
    plan = base()
    plan["steps"][i]["config"]["path"] = "d/" + "x" * 255
    assert validate_plan(plan) == []
