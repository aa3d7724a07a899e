"""Properties of plan validation (hypothesis): generated valid plans validate and order
every edge, an injected back edge never validates, validation never raises.

Hypothesis settings: max_examples=200, deadline=None (see SETTINGS)."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dag.errors import PlanInvalid
from dag.plan import (
    COLUMN_TYPES,
    EXPORT_TABLE_RE,
    INT64_MAX,
    INT64_MIN,
    FieldError,
    parse_plan,
    topological_order,
    validate_plan,
)
from tests.unit.dag.plans import (
    SETTINGS,
)

# --- properties ----------------------------------------------------------------------------------

STEP_NAMES = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}", fullmatch=True)
COLUMN = st.text(min_size=1, max_size=8)
LITERAL = st.one_of(st.none(), st.text(max_size=8), st.integers(INT64_MIN, INT64_MAX))
# A filter_eq value is a template (dag.params): a lone brace there is an error of its own.
TEMPLATE_LITERAL = st.one_of(
    st.none(),
    st.text(max_size=8).map(lambda t: t.replace("{", "{{").replace("}", "}}")),
    st.integers(INT64_MIN, INT64_MAX),
)
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
    _op("filter_eq", column=COLUMN, value=TEMPLATE_LITERAL),
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
