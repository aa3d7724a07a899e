"""The transform ops' column path (an unbuilt `dag.Columns` in, one out, no record built)
against their record path (the same op given the batch as a list of dicts): equal records
(values, their types and the key order), equal as a `Columns` and as a list, equal row errors
(record, column, reason, raw) in the same order, and equal aggregates through checkpoints,
restores and a sum outside int64; on generated batches with nulls, `""`, Unicode white space,
ints at the int64 bounds and good and bad dates.

Property tests use hypothesis with `max_examples=200, deadline=None`."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dag import Columns
from dag.errors import ConfigValueError, Int64OverflowError
from dag.limits import INT64_MAX, INT64_MIN
from dag.ops import whitespace
from dag.transforms import build_transform

PROPERTY = settings(max_examples=200, deadline=None)
COLUMNS = {
    "id": "int",
    "code": "int",
    "name": "string",
    "day": "string",
    "signup": "date",
    "city": "string",
}
NAMES = list(COLUMNS)

# Unicode white space (NBSP, EM SPACE, ideographic space, the separators str.split() knows)
# and a zero-width space, which is not white space.
TEXT = st.text(
    alphabet=st.sampled_from(
        [" ", "\t", "\n", "\r", "a", "B", "é", "\u00a0", "\u2003", "\u3000", "\x1c", "\u200b"]
    ),
    max_size=8,
)
INTS = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.integers(INT64_MAX - 2, INT64_MAX),
    st.integers(INT64_MIN, INT64_MIN + 2),
    st.integers(INT64_MIN, INT64_MAX),
)
DAYS = st.one_of(
    st.none(),
    st.just(""),
    st.dates().map(date.isoformat),
    st.sampled_from(
        ["2023-02-29", "2023-13-01", "20230101", "0000-01-01", "2023-1-01", " 2023-01-01"]
    ),
    st.sampled_from(["\uff12\uff10\uff12\uff13-01-01", "2023-W01-1", "2024-02-29", "x"]),
)
ROWS = st.lists(
    st.tuples(
        INTS,
        st.one_of(st.none(), st.integers(-2, 2), st.sampled_from([INT64_MAX, INT64_MIN])),
        st.one_of(st.none(), TEXT, st.sampled_from(["1", "-1", "None", "Oslo"])),
        DAYS,
        st.one_of(st.none(), st.sampled_from(["2024-01-01", "2024-02-29", "1999-12-31"])),
        st.one_of(st.none(), st.sampled_from(["Oslo", " Oslo", "Riga", ""])),
    ),
    max_size=30,
)
LITERALS = st.one_of(
    st.none(),
    st.integers(-2, 2),
    st.sampled_from([INT64_MAX, INT64_MIN, "x", "", "7", "Oslo", "2024-01-01"]),
)
KEYS = st.sampled_from(
    ["1", "-1", "0", "01", " 1", "+1", "None", "", "a", "Oslo", str(INT64_MAX), "2024-01-01"]
)


def _map_config(column: str, mapping: dict, into: str | None, default: list) -> dict:
    config: dict[str, Any] = {"op": "map", "column": column, "mapping": mapping}
    if into is not None:
        config["into"] = into
    if default:
        config["default"] = default[0]
    return config


WHITESPACE = st.builds(
    lambda op, columns: {"op": op, "columns": columns},
    st.sampled_from(["trim", "normalize_whitespace"]),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True),
)
MAPS = st.builds(
    _map_config,
    st.sampled_from(["id", "code", "name", "day", "signup"]),
    st.dictionaries(KEYS, LITERALS, max_size=4),
    st.sampled_from([None, "code", "city", "word"]),
    st.lists(LITERALS, max_size=1),
)
FILTERS = st.builds(
    lambda column, value: {"op": "filter_eq", "column": column, "value": value},
    st.sampled_from(NAMES),
    LITERALS,
)
PARSE_DATES = st.builds(
    lambda column: {"op": "parse_date", "column": column},
    st.sampled_from(["day", "name", "signup", "city"]),
)
AGGREGATES = st.builds(
    lambda column, group_by: {"op": "aggregate", "column": column, "group_by": group_by},
    st.sampled_from(["id", "code"]),
    st.lists(st.sampled_from(["city", "code", "name", "signup"]), max_size=2, unique=True),
)


def _batch(rows: list[tuple], names: list[str] = NAMES) -> Columns:
    """A typed batch as `type_records` gives it: its columns, records not built."""
    return Columns(names, [[row[i] for row in rows] for i in range(len(names))])


def _records(rows: list[tuple], names: list[str] = NAMES) -> list[dict]:
    return [dict(zip(names, row, strict=True)) for row in rows]


def _shape(records: Any) -> list[list[tuple]]:
    """Records as their keys in order, each value with its type (1 is not "1")."""
    return [[(k, type(v), v) for k, v in record.items()] for record in records]


def _build(config: dict, columns: dict[str, str] = COLUMNS):
    try:
        return build_transform(config, columns), build_transform(config, columns)
    except ConfigValueError:
        assume(False)
        raise


def _same_batch(config: dict, rows: list[tuple], first: int):
    """The op's output of the batch both ways; the column path's output is an unbuilt
    `Columns` and its input is as it was (not built, columns unchanged)."""
    by_columns, by_records = _build(config)
    batch = _batch(rows)
    before = [list(c) for c in batch.columns]
    out, errors = by_columns.apply(batch, first)
    want, want_errors = by_records.apply(_records(rows), first)
    assert isinstance(out, Columns) and not out.built
    assert not batch.built and batch.columns == before
    assert out == want and want == list(out)
    assert _shape(out) == _shape(want)
    assert errors == want_errors
    assert all(list(r) == list(by_columns.output_columns) for r in out)
    return out, errors


@PROPERTY
@given(WHITESPACE, ROWS, st.integers(1, 10**6))
def test_property_whitespace_ops_on_columns_as_on_records(config, rows, first):
    _same_batch(config, rows, first)


@PROPERTY
@given(MAPS, ROWS, st.integers(1, 10**6))
def test_property_map_on_columns_as_on_records(config, rows, first):
    _same_batch(config, rows, first)


@PROPERTY
@given(FILTERS, ROWS, st.integers(1, 10**6))
def test_property_filter_eq_on_columns_as_on_records(config, rows, first):
    _same_batch(config, rows, first)


@PROPERTY
@given(PARSE_DATES, ROWS, st.integers(1, 10**6))
def test_property_parse_date_on_columns_as_on_records(config, rows, first):
    _, errors = _same_batch(config, rows, first)
    assert [e.record for e in errors] == sorted(e.record for e in errors)


def _aggregate(transform, batches: list, restore_at: int, config: dict) -> tuple:
    """`batches` through `transform`, checkpointed after each, resumed in a fresh op after
    `restore_at` batches from the stored parts: its parts and its result (or overflow)."""
    parts: list[bytes] = []
    state = None
    for i, batch in enumerate(batches):
        if i == restore_at:
            transform = build_transform(config, COLUMNS)
            transform.restore(json.loads(json.dumps(state)), _stored(parts, state))
        assert transform.apply(batch, 1 + 30 * i) == ([], [])
        state, (index, part) = transform.checkpoint()
        parts[index:] = [part]
    try:
        return parts, transform.finish()
    except Int64OverflowError as exc:
        return parts, str(exc)


def _stored(parts: list[bytes], state: dict | None) -> list[bytes]:
    return parts[: state["parts"]] if state else []


@PROPERTY
@given(AGGREGATES, st.lists(ROWS, max_size=4), st.integers(0, 4))
def test_property_aggregate_on_columns_as_on_records(config, batches, restore_at):
    """The same checkpoint parts, the same groups and values (or the same refusal of a sum
    outside int64), whether the batches come as columns or as records, resumed or not."""
    by_columns, by_records = _build(config)
    got = _aggregate(by_columns, [_batch(rows) for rows in batches], restore_at, config)
    want = _aggregate(by_records, [_records(rows) for rows in batches], restore_at, config)
    assert got == want
    if not isinstance(got[1], str):
        assert _shape(got[1]) == _shape(want[1])


CHAIN = [
    {"op": "normalize_whitespace", "columns": ["name", "city"]},
    {"op": "map", "column": "code", "mapping": {"1": "one", "-1": None}, "into": "word"},
    {"op": "filter_eq", "column": "word", "value": None},
    {"op": "parse_date", "column": "day"},
    {"op": "trim", "columns": ["word"]},
]


@PROPERTY
@given(ROWS, st.integers(1, 10**6))
def test_property_a_chain_of_ops_never_builds_a_record(rows, first):
    """A fused chain hands each op the previous one's `Columns`: no record is built on the
    way, and the chain's records, errors and aggregate are those of the record path."""
    batch, records, columns = _batch(rows), _records(rows), dict(COLUMNS)
    errors, want_errors = [], []
    for config in CHAIN:
        by_columns, by_records = build_transform(config, columns), build_transform(config, columns)
        batch, more = by_columns.apply(batch, first)
        records, want_more = by_records.apply(records, first)
        assert isinstance(batch, Columns) and not batch.built
        errors += more
        want_errors += want_more
        columns = by_columns.output_columns
    config = {"op": "aggregate", "column": "id", "group_by": ["day", "city"]}
    by_columns, by_records = build_transform(config, columns), build_transform(config, columns)
    assert by_columns.apply(batch, first) == by_records.apply(records, first) == ([], [])
    assert not batch.built
    assert batch == records and errors == want_errors
    try:
        assert by_columns.finish() == by_records.finish()
    except Int64OverflowError:
        with pytest.raises(Int64OverflowError):
            by_records.finish()


@pytest.mark.parametrize("op", ["trim", "normalize_whitespace"])
def test_a_long_value_beside_nulls_on_columns_as_on_records(op):
    long = " a\u2003 b\n" * (whitespace._COLLAPSE_SLICE // 4)
    rows = [(None, None, long, None, None, None), (1, 2, None, None, None, " x ")]
    _same_batch({"op": op, "columns": ["name", "city"]}, rows, 1)


def test_parse_date_errors_name_the_record_column_and_raw_values():
    rows = [
        (1, None, "a", "2024-02-29", None, "Oslo"),
        (2, None, "b", "2023-02-29", None, "Riga"),
        (3, None, "c", "", None, None),
        (4, None, "d", "2023-02-29", None, ""),
        (5, None, "e", "20230101", None, "Oslo"),
    ]
    out, errors = _same_batch({"op": "parse_date", "column": "day"}, rows, 11)
    assert [r["id"] for r in out] == [1, 3] and out[1]["day"] is None
    assert [(e.record, e.column, e.raw["id"], e.raw["day"]) for e in errors] == [
        (12, "day", 2, "2023-02-29"),
        (14, "day", 4, "2023-02-29"),
        (15, "day", 5, "20230101"),
    ]
    assert errors[0].reason == "not a valid calendar date: '2023-02-29'"
    assert errors[2].reason == "not an ISO date (YYYY-MM-DD): '20230101'"


def test_a_built_batch_and_a_list_take_the_record_path():
    rows = [(1, 1, " a ", None, None, None)]
    batch = _batch(rows)
    assert batch[0]["name"] == " a "  # built: the records are the batch
    out, _ = build_transform({"op": "trim", "columns": ["name"]}, COLUMNS).apply(batch)
    assert type(out) is list and out == [{**_records(rows)[0], "name": "a"}]
    out, _ = build_transform({"op": "trim", "columns": ["name"]}, COLUMNS).apply(_records(rows))
    assert type(out) is list


def test_an_int_key_matches_only_its_decimal_text():
    config = {"op": "map", "column": "code", "mapping": {"1": "one", "01": "x", " 2": "y"}}
    rows = [(None, 1, None, None, None, None), (None, 2, None, None, None, None)]
    rows.append((None, None, None, None, None, None))
    out, _ = _same_batch(config, rows, 1)
    assert [r["code"] for r in out] == ["one", "2", None]
