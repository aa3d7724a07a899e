"""Run parameters (dag.params): declarations and placeholders checked with the plan, a run's
values typed, placeholders substituted, and a substituted path that leaves its directory
refused at the parameter that led it there."""

from __future__ import annotations

from typing import Any

import pytest

from dag.errors import FieldError
from dag.params import (
    ParamsInvalid,
    Placeholder,
    parse_template,
    resolve_plan,
    resolve_values,
    uses_placeholders,
    value_range,
)
from dag.plan import parse_plan, validate_plan
from tests.unit.dag.plans import base


def templated(**params: Any) -> dict[str, Any]:
    """The sample plan reading `daily/{day}.csv`, filtering on `{region}`, writing
    `out/{day:%Y/%m/%d}.jsonl`, with `params` declared."""
    plan = base()
    plan["params"] = params or {
        "day": {"type": "date"},
        "region": {"type": "string", "default": "north"},
    }
    plan["steps"][0]["config"]["path"] = "daily/{day}.csv"
    plan["steps"][1]["config"] = {"op": "filter_eq", "column": "name", "value": "{region}"}
    plan["steps"][3]["config"]["path"] = "out/{day:%Y/%m/%d}.jsonl"
    return plan


def test_a_templated_plan_is_valid_and_keeps_its_params() -> None:
    plan = templated()
    assert validate_plan(plan) == []
    parsed = parse_plan(plan)
    assert parsed.params == plan["params"]
    assert parse_plan(parsed.as_dict()) == parsed


def test_parse_template_reads_placeholders_formats_and_escaped_braces() -> None:
    assert parse_template("a{{b}}/{day:%Y/%m}-{run_id}") == [
        "a",
        "{",
        "b",
        "}",
        "/",
        Placeholder("day", "%Y/%m"),
        "-",
        Placeholder("run_id"),
    ]
    with pytest.raises(ValueError, match="unmatched"):
        parse_template("a{b")
    with pytest.raises(ValueError, match="does not name a parameter"):
        parse_template("{Day}")


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"day": {"type": "date", "default": "2026-02-30"}}, "plan.params.day.default", "date"),
        ({"day": {"type": "int", "default": "1"}}, "plan.params.day.default", "integer"),
        ({"day": {"type": "string", "default": 3}}, "plan.params.day.default", "string"),
        ({"day": {"type": "float"}}, "plan.params.day.type", "one of"),
        ({"day": {"type": "date", "min": 1}}, "plan.params.day.min", "unknown field"),
        ({"Day": {"type": "date"}}, "plan.params.Day", "[a-z_]"),
        ({"run_id": {"type": "string"}}, "plan.params.run_id", "built-in"),
        ({"day": "date"}, "plan.params.day", "must be an object"),
    ],
)
def test_a_bad_declaration_is_refused_at_its_field(
    params: dict[str, Any], field: str, message: str
) -> None:
    plan = base()
    plan["params"] = params
    errors = validate_plan(plan)
    assert any(e.field == field and message in e.message for e in errors), errors


def test_an_undeclared_placeholder_is_refused_at_its_field() -> None:
    plan = templated(region={"type": "string"})
    assert validate_plan(plan) == [
        FieldError("plan.steps[0].config.path", "{day} names no declared parameter"),
        FieldError("plan.steps[3].config.path", "{day} names no declared parameter"),
    ]


def test_a_format_belongs_to_a_date_and_braces_must_pair() -> None:
    plan = templated()
    plan["steps"][1]["config"]["value"] = "{region:%Y}"
    plan["steps"][3]["config"]["path"] = "out/{day.jsonl"
    errors = validate_plan(plan)
    assert [e.field for e in errors] == ["plan.steps[1].config.value", "plan.steps[3].config.path"]
    assert "only a date takes a format" in errors[0].message
    assert "unmatched '{'" in errors[1].message


def test_built_ins_need_no_declaration() -> None:
    plan = base()
    plan["steps"][3]["config"]["path"] = "out/{logical_date:%Y%m%d}-{run_id}.jsonl"
    assert validate_plan(plan) == []


def test_values_are_typed_defaulted_and_joined_by_the_built_ins() -> None:
    values = resolve_values(templated(), {"day": "2026-12-01"}, {"run_id": "r1"})
    assert values == {"day": "2026-12-01", "region": "north", "run_id": "r1"}


def test_unknown_missing_and_mistyped_values_each_name_their_parameter() -> None:
    with pytest.raises(ParamsInvalid) as caught:
        resolve_values(templated(), {"region": 3, "colour": "red"}, {})
    assert [e.field for e in caught.value.errors] == [
        "params.colour",
        "params.day",
        "params.region",
    ]
    with pytest.raises(ParamsInvalid, match=r"params\.day: must be a date"):
        resolve_values(templated(), {"day": "2026-13-01"}, {})


def test_resolve_plan_substitutes_every_templated_field() -> None:
    plan = templated()
    resolved = resolve_plan(plan, {"day": "2026-12-01", "region": "north", "run_id": "r"})
    assert resolved["steps"][0]["config"]["path"] == "daily/2026-12-01.csv"
    assert resolved["steps"][1]["config"]["value"] == "north"
    assert resolved["steps"][3]["config"]["path"] == "out/2026/12/01.jsonl"
    assert plan["steps"][0]["config"]["path"] == "daily/{day}.csv"  # never mutated
    assert validate_plan(resolved) == []


def test_an_int_placeholder_alone_in_filter_eq_stays_an_int() -> None:
    plan = templated(n={"type": "int"}, day={"type": "date"}, region={"type": "string"})
    plan["steps"][1]["config"]["value"] = "{n}"
    resolved = resolve_plan(plan, {"n": 7, "day": "2026-01-01", "region": "x"})
    assert resolved["steps"][1]["config"]["value"] == 7


def test_escaped_braces_become_literal_braces() -> None:
    plan = base()
    plan["steps"][3]["config"]["path"] = "out/{{x}}.jsonl"
    assert uses_placeholders(plan)
    assert resolve_plan(plan, {})["steps"][3]["config"]["path"] == "out/{x}.jsonl"
    assert not uses_placeholders(base())


@pytest.mark.parametrize("region", ["../../etc", "/etc", "a/..", ".."])
def test_a_value_leading_out_of_the_directory_is_refused_naming_it(region: str) -> None:
    plan = templated(day={"type": "date"}, region={"type": "string"})
    plan["steps"][0]["config"]["path"] = "{region}/{day:%Y}.csv"
    with pytest.raises(ParamsInvalid) as caught:
        resolve_plan(plan, {"day": "2026-01-01", "region": region})
    (error,) = caught.value.errors
    assert error.field == "params.region"
    assert "plan.steps[0].config.path" in error.message


def test_value_range_steps_a_day_or_one() -> None:
    assert value_range("date", "2024-02-28", "2024-03-01") == [
        "2024-02-28",
        "2024-02-29",
        "2024-03-01",
    ]
    assert value_range("int", 3, 5) == [3, 4, 5]
    assert len(value_range("date", "2013-01-01", "2013-12-31")) == 365
    for bad in [("string", "a", "b"), ("int", 5, 3), ("date", "2013-01-01", "x")]:
        with pytest.raises(ValueError):
            value_range(*bad)


def test_a_schedule_built_in_in_a_manual_run_is_refused_naming_it() -> None:
    plan = base()
    plan["steps"][0]["config"]["path"] = "daily/{logical_date}.csv"
    with pytest.raises(ParamsInvalid) as caught:
        resolve_plan(plan, {"run_id": "r"})
    (error,) = caught.value.errors
    assert error.field == "params.logical_date"
    assert "only a scheduled run" in error.message


def test_a_value_never_turns_a_path_into_a_glob() -> None:
    plan = templated(day={"type": "date"}, region={"type": "string"})
    plan["steps"][0]["config"]["path"] = "{region}/*.csv"  # the plan's own glob is fine
    resolved = resolve_plan(plan, {"day": "2026-01-01", "region": "north"})
    assert resolved["steps"][0]["config"]["path"] == "north/*.csv"
    with pytest.raises(ParamsInvalid, match=r"params\.region: .*glob characters"):
        resolve_plan(plan, {"day": "2026-01-01", "region": "n*"})
