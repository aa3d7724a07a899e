"""Plan validation and parsing (dag.plan): the plan and step shape, dependencies, retries,
every error at once, defaults, the sample plans, colliding export paths."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from dag.errors import PlanInvalid
from dag.plan import (
    FieldError,
    Step,
    parse_plan,
    validate_plan,
)
from tests.unit.dag.plans import (
    DELETE,
    base,
    graph,
    ingest_chain,
    only_error,
    with_config,
    with_step,
    with_transform,
)

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
        graph(
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


# --- export paths ------------------------------------------------------------------------------


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
