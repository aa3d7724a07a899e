"""Data checks (dag.checks): validation with field paths, and evaluation over batches."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from dag.checks import CHECK_KINDS, Checker, key_digests
from dag.errors import ConfigValueError
from dag.plan import parse_plan, validate_plan
from tests.unit.dag.plans import base

S0 = "plan.steps[0].checks"


def with_checks(checks: Any) -> dict[str, Any]:
    plan = base()
    plan["steps"][0]["checks"] = checks
    return plan


@pytest.mark.parametrize(
    ("checks", "field", "fragment"),
    [
        ({}, S0, "must be a list"),
        ([5], f"{S0}[0]", "must be an object"),
        ([{"check": "positive"}], f"{S0}[0].check", "must be one of 'not_null', 'unique'"),
        ([{"check": "not_null"}], f"{S0}[0].columns", "is required"),
        ([{"check": "not_null", "columns": []}], f"{S0}[0].columns", "non-empty list"),
        ([{"check": "unique", "columns": ["a", "a"]}], f"{S0}[0].columns", "twice"),
        ([{"check": "unique", "columns": ["a"], "where": 1}], f"{S0}[0].where", "unknown key"),
        ([{"check": "accepted_values", "column": "a"}], f"{S0}[0].values", "is required"),
        (
            [{"check": "accepted_values", "column": "a", "values": [[1]]}],
            f"{S0}[0].values",
            "strings, numbers or null",
        ),
        ([{"check": "range", "column": "a"}], f"{S0}[0]", "needs 'min', 'max' or both"),
        ([{"check": "range", "column": "a", "min": True}], f"{S0}[0].min", "number or a string"),
        ([{"check": "row_count", "min": -1}], f"{S0}[0].min", "non-negative integer"),
        ([{"check": "row_count"}], f"{S0}[0]", "needs 'min', 'max' or both"),
        ([{"check": "max_reject_ratio", "ratio": 1.5}], f"{S0}[0].ratio", "from 0 to 1"),
        (
            [{"check": "row_count", "min": 1, "severity": "fatal"}],
            f"{S0}[0].severity",
            "'error', 'warn'",
        ),
    ],
)
def test_check_errors_have_field_paths(checks: Any, field: str, fragment: str) -> None:
    errors = validate_plan(with_checks(checks))
    assert [(e.field, fragment in e.message) for e in errors] == [(field, True)], errors


def test_every_kind_round_trips_through_the_plan() -> None:
    checks = [
        {"check": "not_null", "columns": ["a"]},
        {"check": "unique", "columns": ["a", "b"], "severity": "warn"},
        {"check": "accepted_values", "column": "a", "values": ["x", 1, None]},
        {"check": "range", "column": "a", "min": 0},
        {"check": "row_count", "max": 10},
        {"check": "max_reject_ratio", "ratio": 0.1},
    ]
    assert {c["check"] for c in checks} == set(CHECK_KINDS)
    plan = parse_plan(with_checks(checks))
    assert list(plan.steps[0].checks) == checks
    assert parse_plan(plan.as_dict()) == plan
    assert plan.as_dict()["steps"][0]["checks"] == checks
    assert "checks" not in plan.as_dict()["steps"][1]


def run(checks: list[dict], batches: list[list[dict]], rejected: int = 0) -> list[dict]:
    checker, first = Checker(checks), 1
    for batch in batches:
        resumed = Checker(checks)  # each batch in a new attempt, from the checkpoint
        resumed.restore(checker.state())
        resumed.observe(batch, first, [10 * (first + i) for i in range(len(batch))])
        checker, first = resumed, first + len(batch)
    n = sum(map(len, batches))
    return checker.results(n + rejected, n, rejected)


def test_counting_goes_on_across_batches_and_attempts() -> None:
    batches = [
        [{"id": 1, "kind": "a", "d": datetime.date(2024, 1, 1)}, {"id": None, "kind": "b"}],
        [{"id": 3, "kind": "z", "d": datetime.date(2025, 6, 1)}, {"id": -4, "kind": "a"}],
    ]
    results = run(
        [
            {"check": "not_null", "columns": ["id"]},
            {
                "check": "accepted_values",
                "column": "kind",
                "values": ["a", "b"],
                "severity": "warn",
            },
            {"check": "range", "column": "id", "min": 0, "max": 100},
            {"check": "range", "column": "d", "max": "2024-12-31"},
            {"check": "row_count", "min": 5},
            {"check": "max_reject_ratio", "ratio": 0.25},
        ],
        batches,
        rejected=1,
    )
    summary = [(r["check"], r["outcome"], r["failing"], r["examples"]) for r in results]
    third = {"id": 3, "kind": "z", "d": "2025-06-01"}
    assert summary == [
        ("not_null", "failed", 1, [{"record": 2, "line": 20, "null": ["id"],
                                    "values": {"id": None, "kind": "b"}}]),
        ("accepted_values", "warned", 1, [{"record": 3, "line": 30, "value": "z",
                                           "values": third}]),
        ("range", "failed", 1, [{"record": 4, "line": 40, "value": -4,
                                 "values": {"id": -4, "kind": "a"}}]),
        ("range", "failed", 1, [{"record": 3, "line": 30, "value": "2025-06-01",
                                 "values": third}]),
        ("row_count", "failed", 1, [4]),
        ("max_reject_ratio", "passed", 0, []),
    ]  # fmt: skip
    assert results[0]["message"] == "1 record(s) have a null in id"


def test_checks_that_hold_pass() -> None:
    results = run(
        [{"check": "row_count", "min": 1, "max": 2}, {"check": "max_reject_ratio", "ratio": 0}],
        [[{"a": 1}, {"a": 2}]],
    )
    assert [r["outcome"] for r in results] == ["passed", "passed"]


def test_a_check_on_a_missing_column_is_a_config_error() -> None:
    with pytest.raises(ConfigValueError, match="column 'x' is not in the step's output"):
        Checker([{"check": "unique", "columns": ["x"]}]).require({"a": "int"})


def test_key_digests_are_stable_and_tell_keys_apart() -> None:
    rows = [{"a": 1, "b": "x"}, {"a": 1, "b": "x"}, {"a": "1", "b": "x"}, {"a": None, "b": "é"}]
    hashes, keys = key_digests(rows, ["a", "b"])
    assert hashes[0] == hashes[1] != hashes[2]
    assert keys == ['[1, "x"]', '[1, "x"]', '["1", "x"]', '[null, "é"]']
    assert keys == [json.dumps([r["a"], r["b"]], ensure_ascii=False) for r in rows]
    day = datetime.date(2024, 1, 2)
    assert key_digests([{"d": day}], ["d"])[1] == ['["2024-01-02"]']
    long_hashes, long_keys = key_digests([{"a": "z" * 300}, {"a": "z" * 301}], ["a"])
    assert long_hashes[0] != long_hashes[1]
    assert json.loads(long_keys[0]) == '["' + "z" * 198 + "…"


def test_examples_without_lines_name_the_record_and_cut_long_text() -> None:
    checker = Checker([{"check": "accepted_values", "column": "a", "values": ["x"]}])
    checker.observe([{"a": "x"}, {"a": "y" * 300}], first=41)
    (example,) = checker.results(2, 2, 0)[0]["examples"]
    assert example["record"] == 42 and "line" not in example
    assert example["value"] == "y" * 200 + "…" == example["values"]["a"]


def test_an_example_of_a_wide_record_shows_the_checked_and_first_columns() -> None:
    wide = {f"c{i}": i for i in range(50)} | {"c42": None}
    checker = Checker([{"check": "not_null", "columns": ["c42"]}])
    checker.observe([wide])
    values = checker.results(1, 1, 0)[0]["examples"][0]["values"]
    assert list(values) == [f"c{i}" for i in range(19)] + ["c42"]
