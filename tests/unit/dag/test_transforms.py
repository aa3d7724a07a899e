"""Transforms: every op, its config errors, and batch-split independence.

Property tests use hypothesis with `max_examples=200, deadline=None`.
"""

from __future__ import annotations

import copy
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dag.errors import ConfigValueError, Int64OverflowError
from dag.ops import whitespace
from dag.transforms import build_transform
from dag.types import INT64_MAX, INT64_MIN

PROPERTY = settings(max_examples=200, deadline=None)
COLUMNS = {"id": "int", "name": "string", "n": "int", "day": "date", "raw": "string"}


def rec(**values) -> dict:
    return {name: values.get(name) for name in COLUMNS}


def run(config: dict, records: list[dict], columns: dict | None = None):
    transform = build_transform(config, columns or COLUMNS)
    out, errors = transform.apply(records, 1)
    return out + transform.finish(), errors


# --- config against the input columns ----------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {"op": "trim", "columns": ["name", "nope"]},
        {"op": "normalize_whitespace", "columns": ["nope"]},
        {"op": "map", "column": "nope", "mapping": {}},
        {"op": "filter_eq", "column": "nope", "value": 1},
        {"op": "parse_date", "column": "nope"},
        {"op": "aggregate", "column": "nope"},
        {"op": "aggregate", "column": "n", "group_by": ["name", "nope"]},
    ],
)
def test_unknown_column_is_a_config_value_error_naming_it(config):
    with pytest.raises(ConfigValueError) as info:
        build_transform(config, COLUMNS)
    assert info.value.column == "nope"
    assert "'nope'" in str(info.value)


@pytest.mark.parametrize(
    "config",
    [
        {"op": "explode"},
        {"op": "trim", "columns": "name"},
        {"op": "map", "column": "name"},
        {"op": "filter_eq", "column": "name"},
    ],
)
def test_malformed_config_is_a_config_value_error(config):
    with pytest.raises(ConfigValueError):
        build_transform(config, COLUMNS)


# --- trim / normalize_whitespace ---------------------------------------------------------


def test_trim_strips_unicode_white_space_of_string_columns_only():
    records = [rec(id=1, name="\u00a0 Ann\t\n", raw=" x "), rec(id=2, name=None)]
    before = copy.deepcopy(records)
    transform = build_transform({"op": "trim", "columns": ["name", "id", "day"]}, COLUMNS)
    out, errors = transform.apply(records, 1)
    assert [r["name"] for r in out] == ["Ann", None]
    assert out[0]["raw"] == " x " and out[0]["id"] == 1
    assert errors == [] and records == before
    assert transform.output_columns == COLUMNS
    assert (transform.state(), transform.finish()) == (None, [])


def test_normalize_whitespace_collapses_every_kind_of_white_space():
    name = '  Carla \u00a0\u2003 "CJ"\t\tM\u00fcller\r\n(billing)\u3000 '
    out, _ = run({"op": "normalize_whitespace", "columns": ["name"]}, [rec(name=name)])
    assert out[0]["name"] == 'Carla "CJ" M\u00fcller (billing)'
    out, _ = run({"op": "normalize_whitespace", "columns": ["name"]}, [rec(name=" \t ")])
    assert out[0]["name"] == ""


# --- map --------------------------------------------------------------------------------


def test_map_in_place_with_pass_through():
    config = {"op": "map", "column": "name", "mapping": {"A": "active", "I": "inactive"}}
    transform = build_transform(config, COLUMNS)
    out, _ = transform.apply([rec(name="A"), rec(name="x"), rec(name=None)], 1)
    assert [r["name"] for r in out] == ["active", "x", None]
    assert transform.output_columns == COLUMNS


def test_map_into_a_new_column_with_default():
    config = {"op": "map", "column": "name", "mapping": {"A": "active"}, "into": "label",
              "default": "other"}  # fmt: skip
    transform = build_transform(config, COLUMNS)
    records = [rec(name="A"), rec(name="B"), rec(name=None)]
    out, _ = transform.apply(records, 1)
    assert [(r["name"], r["label"]) for r in out] == [
        ("A", "active"),
        ("B", "other"),
        (None, "other"),
    ]
    assert list(transform.output_columns) == [*COLUMNS, "label"]
    assert transform.output_columns["label"] == "string"
    assert "label" not in records[0]


def test_map_int_column_keys_are_strings_and_output_stays_int():
    config = {"op": "map", "column": "n", "mapping": {"1": 100, "2": None}}
    transform = build_transform(config, COLUMNS)
    out, _ = transform.apply([rec(n=1), rec(n=2), rec(n=3), rec(n=None)], 1)
    assert [r["n"] for r in out] == [100, None, 3, None]
    assert transform.output_columns["n"] == "int"


def test_map_to_strings_converts_passed_through_ints():
    config = {"op": "map", "column": "n", "mapping": {"1": "one"}, "into": "word"}
    transform = build_transform(config, COLUMNS)
    out, _ = transform.apply([rec(n=1), rec(n=7), rec(n=None)], 1)
    assert [r["word"] for r in out] == ["one", "7", None]
    assert [r["n"] for r in out] == [1, 7, None]
    assert transform.output_columns["word"] == "string"


def test_map_string_column_to_ints_with_a_default_is_int():
    config = {"op": "map", "column": "name", "mapping": {"A": 1}, "default": 0, "into": "flag"}
    transform = build_transform(config, COLUMNS)
    out, _ = transform.apply([rec(name="A"), rec(name="B")], 1)
    assert [r["flag"] for r in out] == [1, 0]
    assert transform.output_columns["flag"] == "int"


def test_map_ints_without_default_on_a_string_column_is_string():
    config = {"op": "map", "column": "name", "mapping": {"A": 1}}
    transform = build_transform(config, COLUMNS)
    out, _ = transform.apply([rec(name="A"), rec(name="B")], 1)
    assert [r["name"] for r in out] == ["1", "B"]
    assert transform.output_columns["name"] == "string"


def test_map_into_an_existing_column_replaces_it_and_its_type():
    config = {"op": "map", "column": "name", "mapping": {"A": "x"}, "into": "n"}
    transform = build_transform(config, COLUMNS)
    out, _ = transform.apply([rec(name="A", n=5), rec(name="B", n=6)], 1)
    assert [r["n"] for r in out] == ["x", "B"]
    assert list(transform.output_columns) == list(COLUMNS)
    assert transform.output_columns["n"] == "string"


def test_map_int_value_out_of_range_is_a_config_error():
    with pytest.raises(ConfigValueError):
        build_transform({"op": "map", "column": "n", "mapping": {"1": INT64_MAX + 1}}, COLUMNS)


# --- filter_eq --------------------------------------------------------------------------


@pytest.mark.parametrize("literal", [1, "1"])
def test_filter_eq_int_column_compares_typed(literal):
    out, _ = run({"op": "filter_eq", "column": "n", "value": literal},
                 [rec(id=1, n=1), rec(id=2, n=10), rec(id=3, n=None), rec(id=4, n=1)])  # fmt: skip
    assert [r["id"] for r in out] == [1, 4]


def test_filter_eq_string_column_does_not_match_ints_by_accident():
    records = [rec(id=1, name="1"), rec(id=2, name="01"), rec(id=3, name=None)]
    out, _ = run({"op": "filter_eq", "column": "name", "value": "1"}, records)
    assert [r["id"] for r in out] == [1]
    out, _ = run({"op": "filter_eq", "column": "name", "value": 1}, records)
    assert [r["id"] for r in out] == [1]


def test_filter_eq_null_literal_keeps_nulls():
    records = [rec(id=1, name=""), rec(id=2, name=None), rec(id=3, n=None)]
    out, _ = run({"op": "filter_eq", "column": "name", "value": None}, records)
    assert [r["id"] for r in out] == [2, 3]
    out, _ = run({"op": "filter_eq", "column": "name", "value": ""}, records)
    assert [r["id"] for r in out] == [1]


def test_filter_eq_date_column():
    records = [rec(id=1, day="2024-01-02"), rec(id=2, day="2024-01-03")]
    out, _ = run({"op": "filter_eq", "column": "day", "value": "2024-01-03"}, records)
    assert [r["id"] for r in out] == [2]


@pytest.mark.parametrize(
    ("column", "literal"),
    [("n", "one"), ("n", "1.0"), ("n", True), ("n", 1.5), ("n", ""), ("n", "9223372036854775808"),
     ("day", "2024-02-30"), ("day", "yesterday"), ("day", "")],
)  # fmt: skip
def test_filter_eq_literal_that_does_not_fit_the_column(column, literal):
    with pytest.raises(ConfigValueError) as info:
        build_transform({"op": "filter_eq", "column": column, "value": literal}, COLUMNS)
    assert info.value.column == column


# --- parse_date -------------------------------------------------------------------------


def test_parse_date_types_the_column_and_rejects_bad_values():
    transform = build_transform({"op": "parse_date", "column": "raw"}, COLUMNS)
    assert transform.output_columns["raw"] == "date"
    records = [rec(id=1, raw="2024-02-29"), rec(id=2, raw="2023-02-29"), rec(id=3, raw=""),
               rec(id=4, raw=None), rec(id=5, raw="02/03/2024")]  # fmt: skip
    out, errors = transform.apply(records, 41)
    assert [(r["id"], r["raw"]) for r in out] == [(1, "2024-02-29"), (3, None), (4, None)]
    assert [(e.record, e.column, e.line) for e in errors] == [(42, "raw", None), (45, "raw", None)]
    assert errors[0].raw == records[1]
    assert "calendar" in errors[0].reason


def test_parse_date_on_an_int_column_is_a_config_error():
    with pytest.raises(ConfigValueError):
        build_transform({"op": "parse_date", "column": "n"}, COLUMNS)


# --- aggregate --------------------------------------------------------------------------


def test_aggregate_without_group_by():
    transform = build_transform({"op": "aggregate", "column": "n"}, COLUMNS)
    assert transform.output_columns == {"count": "int", "sum": "int", "min": "int", "max": "int"}
    out, errors = transform.apply([rec(n=5), rec(n=None), rec(n=-2), rec(n=7)], 1)
    assert (out, errors) == ([], [])
    assert transform.finish() == [{"count": 4, "sum": 10, "min": -2, "max": 7}]


def test_aggregate_grouped_in_first_seen_order():
    config = {"op": "aggregate", "column": "n", "group_by": ["name", "day"]}
    transform = build_transform(config, COLUMNS)
    assert list(transform.output_columns.items()) == [
        ("name", "string"), ("day", "date"), ("count", "int"), ("sum", "int"), ("min", "int"),
        ("max", "int"),
    ]  # fmt: skip
    transform.apply([rec(name="b", n=1), rec(name="a", n=None), rec(name="b", n=3)], 1)
    transform.apply([rec(name=None, n=4), rec(name="a", n=2)], 4)
    assert transform.finish() == [
        {"name": "b", "day": None, "count": 2, "sum": 4, "min": 1, "max": 3},
        {"name": "a", "day": None, "count": 2, "sum": 2, "min": 2, "max": 2},
        {"name": None, "day": None, "count": 1, "sum": 4, "min": 4, "max": 4},
    ]


def test_aggregate_empty_input():
    transform = build_transform({"op": "aggregate", "column": "n"}, COLUMNS)
    assert transform.finish() == [{"count": 0, "sum": 0, "min": None, "max": None}]
    grouped = build_transform({"op": "aggregate", "column": "n", "group_by": ["name"]}, COLUMNS)
    grouped.apply([], 1)
    assert grouped.finish() == []


def test_aggregate_all_null_values():
    out, _ = run({"op": "aggregate", "column": "n"}, [rec(n=None), rec(n=None)])
    assert out == [{"count": 2, "sum": 0, "min": None, "max": None}]


def test_aggregate_needs_an_int_column():
    with pytest.raises(ConfigValueError) as info:
        build_transform({"op": "aggregate", "column": "name"}, COLUMNS)
    assert info.value.column == "name"


def test_aggregate_group_by_cannot_shadow_an_output_column():
    with pytest.raises(ConfigValueError):
        build_transform({"op": "aggregate", "column": "n", "group_by": ["count"]},
                        {"n": "int", "count": "string"})  # fmt: skip


@pytest.mark.parametrize(
    "values", [[INT64_MAX, 1], [INT64_MIN, -1], [INT64_MAX // 2 + 1, INT64_MAX // 2 + 1]]
)
def test_aggregate_sum_overflow_is_an_input_data_error(values):
    transform = build_transform({"op": "aggregate", "column": "n"}, COLUMNS)
    transform.apply([rec(n=v) for v in values], 1)
    with pytest.raises(Int64OverflowError) as info:
        transform.finish()
    assert info.value.column == "n"


def test_aggregate_sum_is_exact_at_the_bounds():
    out, _ = run({"op": "aggregate", "column": "n"}, [rec(n=INT64_MAX), rec(n=1), rec(n=-1)])
    assert out[0]["sum"] == INT64_MAX
    out, _ = run({"op": "aggregate", "column": "n"}, [rec(n=INT64_MIN), rec(n=0)])
    assert out[0]["sum"] == INT64_MIN


def test_aggregate_state_survives_json_and_a_new_process():
    config = {"op": "aggregate", "column": "n", "group_by": ["name", "id"]}
    first = build_transform(config, COLUMNS)
    first.apply([rec(name="a", id=1, n=2), rec(name=None, id=None, n=3)], 1)
    state = json.loads(json.dumps(first.state()))
    assert state["groups"][0][0] == ["a", 1]  # group keys are JSON lists
    second = build_transform(config, COLUMNS)
    second.restore(state)
    second.apply([rec(name="a", id=1, n=5)], 3)
    assert second.finish() == [
        {"name": "a", "id": 1, "count": 2, "sum": 7, "min": 2, "max": 5},
        {"name": None, "id": None, "count": 1, "sum": 3, "min": 3, "max": 3},
    ]


def _stored(parts: dict[int, bytes], state: dict) -> list[bytes]:
    """The parts a checkpoint's state names, as the executor reads them back."""
    return [parts[i] for i in range(state["parts"])]


def test_aggregate_checkpoint_stores_only_the_groups_its_batch_touched():
    """A batch's checkpoint costs what the batch touched, not every group so far: the
    state holds a count of parts, each batch stores one part of its groups."""
    config = {"op": "aggregate", "column": "n", "group_by": ["id"]}
    transform = build_transform(config, COLUMNS)
    transform.apply([rec(id=i, n=i) for i in range(1000)], 1)
    state, (index, part) = transform.checkpoint()
    assert (state, index, len(json.loads(part))) == ({"parts": 1, "entries": 1000}, 0, 1000)
    transform.apply([rec(id=i, n=1) for i in range(10)], 1001)
    state, (index, part) = transform.checkpoint()
    assert (state, index, len(json.loads(part))) == ({"parts": 2, "entries": 1010}, 1, 10)


def test_aggregate_parts_fold_into_one_when_they_hold_twice_the_groups():
    config = {"op": "aggregate", "column": "n", "group_by": ["id"]}
    transform = build_transform(config, COLUMNS)
    parts: dict[int, bytes] = {}
    for batch in range(5):  # the same 100 groups every batch
        transform.apply([rec(id=i, n=batch) for i in range(100)], 1 + 100 * batch)
        state, (index, part) = transform.checkpoint()
        parts[index] = part
        assert state["entries"] <= 2 * 100
    assert state == {"parts": 1, "entries": 100}  # batch 5: 200 + 100 > 200, one part again
    restored = build_transform(config, COLUMNS)
    restored.restore(state, _stored(parts, state))
    assert restored.finish() == transform.finish()


def test_aggregate_many_groups_across_batches_resumed_from_its_checkpoints():
    """60,000 groups in 240 batches of 500, groups coming back in later batches, a
    checkpoint after every batch: a new transform every 30 batches, restored from the
    checkpoint's state and stored parts (as a new attempt after a crash), gives what one
    pass gives."""
    config = {"op": "aggregate", "column": "n", "group_by": ["name", "id"]}
    records = [rec(name=f"g{(i * 7919) % 60_000}", id=i % 3, n=i % 1000 - 500)
               for i in range(120_000)]  # fmt: skip
    whole = build_transform(config, COLUMNS)
    whole.apply(records, 1)
    expected = whole.finish()
    parts: dict[int, bytes] = {}
    state = None
    for lo in range(0, len(records), 500):
        if lo % 15_000 == 0:
            transform = build_transform(config, COLUMNS)
            transform.restore(state, [] if state is None else _stored(parts, state))
        transform.apply(records[lo : lo + 500], lo + 1)
        state, (index, part) = transform.checkpoint()
        state = json.loads(json.dumps(state))
        parts[index] = part
    last = build_transform(config, COLUMNS)
    last.restore(state, _stored(parts, state))
    assert last.finish() == expected
    assert len(expected) == 60_000  # each group in two batches, 120 batches apart


# --- properties -------------------------------------------------------------------------

RECORDS = st.lists(
    st.builds(
        lambda values: rec(**values),
        st.fixed_dictionaries(
            {
                "id": st.integers(0, 5) | st.none(),
                "name": st.sampled_from(["A", "I", " a\u00a0b ", "x\t\ny", "", "1"]) | st.none(),
                "n": st.integers(INT64_MIN // 4, INT64_MAX // 4) | st.integers(-3, 3) | st.none(),
                "day": st.sampled_from(["2024-01-01", "2024-02-29"]) | st.none(),
                "raw": st.sampled_from(["2024-03-01", "2023-02-29", "nope", ""]) | st.none(),
            }
        ),
    ),
    max_size=40,
)
CONFIGS = st.sampled_from(
    [
        {"op": "trim", "columns": ["name", "raw"]},
        {"op": "normalize_whitespace", "columns": ["name"]},
        {"op": "map", "column": "name", "mapping": {"A": "active", "I": 0}, "into": "label"},
        {"op": "map", "column": "id", "mapping": {"1": 10, "2": 20}},
        {"op": "map", "column": "id", "mapping": {"1": "one"}, "default": "many", "into": "id"},
        {"op": "filter_eq", "column": "id", "value": "2"},
        {"op": "filter_eq", "column": "name", "value": None},
        {"op": "parse_date", "column": "raw"},
        {"op": "aggregate", "column": "n"},
        {"op": "aggregate", "column": "n", "group_by": ["name"]},
        {"op": "aggregate", "column": "id", "group_by": ["day", "name"]},
    ]
)


@PROPERTY
@given(CONFIGS, RECORDS, st.lists(st.integers(0, 40), max_size=6))
def test_property_any_batch_split_gives_the_same_output(config, records, cuts):
    before = copy.deepcopy(records)
    whole = build_transform(config, COLUMNS)
    expected, expected_errors = whole.apply(records, 1)
    expected = expected + whole.finish()

    bounds = sorted({0, len(records), *(c for c in cuts if c <= len(records))})
    out, errors, state = [], [], None
    for lo, hi in itertools.pairwise(bounds):
        # A fresh transform per batch, as after a crash: only the checkpointed state carries.
        part = build_transform(config, COLUMNS)
        part.restore(state)
        got, got_errors = part.apply(records[lo:hi], lo + 1)
        out += got
        errors += got_errors
        state = json.loads(json.dumps(part.state()))
    last = build_transform(config, COLUMNS)
    last.restore(state)
    out += last.finish()

    assert out == expected
    assert errors == expected_errors
    assert records == before  # inputs are never mutated
    assert all(list(r) == list(whole.output_columns) for r in out)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", None]),
            st.sampled_from([1, 2]),
            st.one_of(st.none(), st.integers(-5, 5)),
        ),
        max_size=40,
    ),
    st.integers(1, 7),
    st.sampled_from([[], ["g"], ["g", "h"]]),
)
def test_property_aggregate_matches_a_plain_computation(rows, batch, group_by):
    """Any batch split, any group key (nulls included): the counts, sums, minima and maxima
    of a naive loop over all records, groups in first-seen order."""
    columns = {"g": "string", "h": "int", "v": "int"}
    records = [dict(zip(columns, row, strict=True)) for row in rows]
    transform = build_transform({"op": "aggregate", "column": "v", "group_by": group_by}, columns)
    for i in range(0, len(records), batch):
        assert transform.apply(records[i : i + batch]) == ([], [])
    expected: dict[tuple, list] = {} if group_by or records else {(): []}
    for r in records:
        expected.setdefault(tuple(r[c] for c in group_by), []).append(r["v"])
    want = []
    for key, values in expected.items():
        present = [v for v in values if v is not None]
        want.append({**dict(zip(group_by, key, strict=True)), "count": len(values),
                     "sum": sum(present), "min": min(present, default=None),
                     "max": max(present, default=None)})  # fmt: skip
    assert transform.finish() == want


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from([" ", "\t", "\n", "\u00a0", "\u2003", "\x85", "a", "é"])),
    st.integers(1, 12),
)
def test_a_long_value_collapses_as_split_and_join_do(value, slice_chars):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(whitespace, "_COLLAPSE_SLICE", slice_chars)
        assert whitespace._collapse_long(value) == " ".join(value.split())


def test_a_long_value_collapsed_twice_is_the_same_object_the_second_time():
    t = build_transform({"op": "normalize_whitespace", "columns": ["a"]}, {"a": "string"})
    long = "word  " * 50_000
    (once,), _ = t.apply([{"a": long}])
    (twice,), _ = t.apply([once])
    assert once["a"] == " ".join(long.split()) and twice["a"] is once["a"]
