"""The sample plans of fixtures/plans: the valid ones validate, the invalid ones report
exactly their problems."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dag.plan import (
    FieldError,
    parse_plan,
    validate_plan,
)
from tests.unit.dag.plans import (
    BASE,
    PLANS_DIR,
)

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
