"""Column types: inference, conversion, int64 bounds, row errors.

Property tests use hypothesis with `max_examples=200, deadline=None`.
"""

from __future__ import annotations

import io
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dag.csvparts import read_csv_batches
from dag.errors import ConfigValueError
from dag.inference import infer_columns
from dag.jsonparts import read_json_batches
from dag.records import RawRecord
from dag.types import (
    COLUMN_TYPES,
    INT64_MAX,
    INT64_MIN,
    convert_value,
    type_records,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
PROPERTY = settings(max_examples=200, deadline=None)


def raws(*rows: dict) -> list[RawRecord]:
    return [RawRecord(line, values) for line, values in enumerate(rows, start=2)]


def test_constants():
    assert COLUMN_TYPES == ("int", "string", "date")
    assert (INT64_MIN, INT64_MAX) == (-(2**63), 2**63 - 1)


# --- conversion -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("0", 0),
        ("-0", 0),
        ("42", 42),
        ("-17", -17),
        ("9223372036854775807", INT64_MAX),
        ("-9223372036854775808", INT64_MIN),
        (7, 7),
        (INT64_MIN, INT64_MIN),
        (None, None),
        ("", None),
    ],
)
def test_int_accepts(text, number):
    assert convert_value(text, "int") == number


@pytest.mark.parametrize(
    "value",
    [
        "9223372036854775808",
        "-9223372036854775809",
        "99999999999999999999999",
        "9" * 5000,  # longer than int()'s digit limit: still a clean refusal
        INT64_MAX + 1,
        INT64_MIN - 1,
        "+1",
        " 1",
        "1 ",
        "007",
        "1.0",
        "1e3",
        "0x10",
        "\u0661\u0662",  # Arabic-Indic digits: int() would take them
        "1_000",
        "-",
        "abc",
        True,
        1.0,
        [1],
    ],
)
def test_int_refuses(value):
    with pytest.raises(ValueError, match="not an int64"):
        convert_value(value, "int")


def test_int_out_of_range_reason_names_the_value():
    with pytest.raises(ValueError) as info:
        convert_value("9223372036854775808", "int")
    assert "not an int64: '9223372036854775808'" in str(info.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2024-02-29", "2024-02-29"), ("0001-01-01", "0001-01-01"), ("", None), (None, None)],
)
def test_date_accepts(value, expected):
    assert convert_value(value, "date") == expected


@pytest.mark.parametrize(
    "value",
    [
        "2023-02-29",
        "2024-13-01",
        "2024-00-10",
        "0000-01-01",
        "20240101",
        "2024-1-01",
        "2024-W01-1",
        "2024-01-01T00:00:00",
        " 2024-01-01",
        "\uff12\uff10\uff12\uff14-01-01",  # full-width digits
        20240101,
    ],
)
def test_date_refuses(value):
    with pytest.raises(ValueError, match="date"):
        convert_value(value, "date")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("  x ", "  x "),
        ("", ""),
        (None, None),
        (12, "12"),
        (1.5, "1.5"),
        (True, "true"),
        ({"a": [1, "é"]}, '{"a":[1,"é"]}'),
    ],
)
def test_string_conversion(value, expected):
    assert convert_value(value, "string") == expected


# --- inference --------------------------------------------------------------------------


def test_inference_per_rule():
    records = raws(
        {"i": "1", "d": "2024-01-31", "s": "x", "n": None, "z": "007", "m": "1", "e": ""},
        {"i": "-20", "d": None, "s": "1", "n": None, "z": "1", "m": "2024-01-01", "e": None},
        {"i": None, "d": "", "s": "2024-01-01", "n": "", "z": "2", "m": "3", "e": "5"},
    )
    header = ["i", "d", "s", "n", "z", "m", "e"]
    assert infer_columns(header, records, {}) == {
        "i": "int",
        "d": "date",
        "s": "string",
        "n": "string",  # no non-null value
        "z": "string",  # leading zeros are kept by keeping the text
        "m": "string",
        "e": "int",  # "" is null for inference
    }


def test_inference_int_needs_the_int64_range():
    header = ["a", "b"]
    records = raws({"a": "9223372036854775807", "b": "9223372036854775808"})
    assert infer_columns(header, records, None) == {"a": "int", "b": "string"}


def test_inference_invalid_calendar_date_is_string():
    assert infer_columns(["d"], raws({"d": "2024-02-30"}), {}) == {"d": "string"}


def test_inference_from_json_values():
    records = raws(
        {"i": 1, "b": True, "f": 1.0, "s": "2024-01-01", "t": "5", "x": [1]},
        {"i": -2, "b": False, "f": 2, "s": None, "t": 6, "x": None},
    )
    header = ["i", "b", "f", "s", "t", "x"]
    assert infer_columns(header, records, {}) == {
        "i": "int",
        "b": "string",
        "f": "string",
        "s": "date",
        "t": "int",
        "x": "string",
    }


def test_declared_types_win_and_order_follows_the_header():
    header = ["c", "a", "b"]
    records = raws({"c": "1", "a": "1", "b": "x"})
    assert list(infer_columns(header, records, {"a": "string", "b": "int"}).items()) == [
        ("c", "int"),
        ("a", "string"),
        ("b", "int"),
    ]


def test_declared_column_missing_from_the_header():
    with pytest.raises(ConfigValueError) as info:
        infer_columns(["a"], [], {"amount": "int"})
    assert info.value.column == "amount"
    assert "amount" in str(info.value)


def test_declared_unknown_type():
    with pytest.raises(ConfigValueError) as info:
        infer_columns(["a"], [], {"a": "float"})
    assert info.value.column == "a"


def test_no_records_infers_string():
    assert infer_columns(["a", "b"], [], {"b": "int"}) == {"a": "string", "b": "int"}


# --- typing records ---------------------------------------------------------------------


def test_type_records_converts_and_reports_bad_rows():
    columns = {"id": "int", "name": "string", "day": "date"}
    records = raws(
        {"id": "1", "name": "Ann", "day": "2024-01-01"},
        {"id": "9223372036854775808", "name": "Bob", "day": "2024-01-02"},
        {"id": "", "name": "", "day": ""},
        {"id": "3", "name": None, "day": "2024-02-30"},
        {"id": "-9223372036854775808", "name": "Eve", "day": None},
    )
    typed, errors = type_records(records, columns, first_ordinal=11)
    assert typed == [
        {"id": 1, "name": "Ann", "day": "2024-01-01"},
        {"id": None, "name": "", "day": None},
        {"id": INT64_MIN, "name": "Eve", "day": None},
    ]
    assert [(e.line, e.record, e.column) for e in errors] == [(3, 12, "id"), (5, 14, "day")]
    assert errors[0].reason.startswith("not an int64: '9223372036854775808'")
    assert errors[0].raw == {"id": "9223372036854775808", "name": "Bob", "day": "2024-01-02"}
    assert "calendar" in errors[1].reason


def test_type_records_one_error_per_record_naming_the_first_bad_column():
    typed, errors = type_records(raws({"a": "x", "b": "y"}), {"a": "int", "b": "int"})
    assert typed == []
    assert [(e.record, e.column) for e in errors] == [(1, "a")]


def test_type_records_key_order_and_missing_values():
    typed, _ = type_records(raws({"b": "2", "a": "x"}), {"a": "string", "b": "int", "c": "int"})
    assert list(typed[0].items()) == [("a", "x"), ("b", 2), ("c", None)]


def test_type_records_does_not_mutate_its_input():
    records = raws({"a": "1"})
    type_records(records, {"a": "int"})
    assert records[0].values == {"a": "1"}


@pytest.mark.parametrize(
    ("kind", "odd"),
    [
        ("int", "-0"),
        ("int", "007"),
        ("int", "9223372036854775808"),
        ("int", ""),
        ("int", None),
        ("date", "0000-01-01"),
        ("date", "20240101"),
        ("date", ""),
        ("string", 1),
    ],
)
def test_type_records_one_odd_value_in_a_batch_of_good_text(kind, odd):
    good = {"int": "12", "date": "2024-01-02", "string": "x"}[kind]
    records = raws({"a": good, "b": "y"}, {"a": odd, "b": "z"})
    typed, errors = type_records(records, {"a": kind, "b": "string"})
    try:
        expected = [{"a": convert_value(odd, kind), "b": "z"}]
    except ValueError as exc:
        expected = []
        assert [(e.record, e.column, e.reason) for e in errors] == [(2, "a", str(exc))]
    assert typed == [{"a": convert_value(good, kind), "b": "y"}, *expected]


def test_json_values_typed():
    columns = {"i": "int", "s": "string", "d": "date"}
    records = raws(
        {"i": 5, "s": 1.5, "d": "2024-05-06"},
        {"i": "6", "s": False, "d": None},
        {"i": True, "s": "x", "d": None},
        {"i": 1.0, "s": "x", "d": None},
        {"i": 1, "s": "x", "d": 20240101},
    )
    typed, errors = type_records(records, columns)
    assert typed == [
        {"i": 5, "s": "1.5", "d": "2024-05-06"},
        {"i": 6, "s": "false", "d": None},
    ]
    assert [(e.record, e.column) for e in errors] == [(3, "i"), (4, "i"), (5, "d")]


def test_customers_fixture_types_with_three_bad_rows():
    with open(FIXTURES / "customers.csv", "rb") as stream:
        [batch] = list(read_csv_batches(stream))
    columns = infer_columns(batch.header, batch.records, {"amount": "int"})
    assert columns == {
        "id": "int",
        "name": "string",
        "amount": "int",
        "signup": "string",  # one bad date makes the undeclared column a string
        "status": "string",
        "country": "string",
    }
    columns["signup"] = "date"
    typed, errors = type_records(batch.records, columns)
    assert len(typed) + len(errors) == len(batch.records)
    assert sorted(e.column for e in errors) == ["amount", "amount", "signup"]


def test_json_fixture_types():
    with open(FIXTURES / "customers.json", "rb") as stream:
        [batch] = list(read_json_batches(stream))
    columns = infer_columns(batch.header, batch.records, {})
    assert columns["id"] == "int" and columns["amount"] == "int"
    assert columns["signup"] == "date"
    typed, errors = type_records(batch.records, columns)
    assert errors == [] and len(typed) == 10


# --- properties -------------------------------------------------------------------------


@PROPERTY
@given(st.integers(min_value=INT64_MIN - 10, max_value=INT64_MAX + 10))
def test_property_int_text_round_trips_exactly_in_range(number):
    if INT64_MIN <= number <= INT64_MAX:
        assert convert_value(str(number), "int") == number
    else:
        with pytest.raises(ValueError):
            convert_value(str(number), "int")


@PROPERTY
@given(st.dates())
def test_property_iso_dates_are_dates(day):
    text = day.isoformat()
    assert convert_value(text, "date") == text
    assert infer_columns(["d"], raws({"d": text}), {}) == {"d": "date"}


@PROPERTY
@given(st.lists(st.integers(INT64_MIN, INT64_MAX), min_size=1, max_size=20))
def test_property_csv_ints_infer_and_type_as_ints(numbers):
    data = ("n\n" + "".join(f"{n}\n" for n in numbers)).encode()
    [batch] = list(read_csv_batches(io.BytesIO(data)))
    columns = infer_columns(batch.header, batch.records, {})
    assert columns == {"n": "int"}
    typed, errors = type_records(batch.records, columns)
    assert [r["n"] for r in typed] == numbers and errors == []


# Text each column type must judge exactly, then values of any JSON type.
_ODD_TEXT = st.one_of(
    st.sampled_from(["", "-0", "007", "+1", " 1", "1_0", "\u0663", "0000-01-01", "2023-02-29"]),
    st.sampled_from(["20230101", "2023-1-01", str(INT64_MAX + 1), str(INT64_MIN - 1)]),
    st.text(max_size=4),
)
_ODD_VALUES = st.one_of(
    _ODD_TEXT,
    st.none(),
    st.integers(INT64_MIN - 1, INT64_MAX + 1),
    st.booleans(),
    st.floats(allow_nan=False),
)
_CLEAN_VALUES = {
    "int": st.integers(INT64_MIN, INT64_MAX).map(str),
    "string": st.one_of(st.none(), st.text(max_size=4)),
    "date": st.dates().map(date.isoformat),
}


@PROPERTY
@given(st.data())
def test_property_type_records_is_convert_value_record_by_record(data):
    kinds = data.draw(st.lists(st.sampled_from(COLUMN_TYPES), min_size=1, max_size=4))
    columns = {f"c{i}": kind for i, kind in enumerate(kinds)}
    # A batch of good values, or one with odd text among them, or anything goes.
    odd = data.draw(st.sampled_from([None, _ODD_TEXT, _ODD_VALUES]))
    values = {
        name: _CLEAN_VALUES[kind] if odd is None else st.one_of(_CLEAN_VALUES[kind], odd)
        for name, kind in columns.items()
    }
    records = data.draw(st.lists(st.fixed_dictionaries(values), max_size=8))
    expected_typed, expected_errors = [], []
    for ordinal, values in enumerate(records, start=5):
        try:
            expected_typed.append({n: convert_value(values[n], k) for n, k in columns.items()})
        except ValueError:
            for name, kind in columns.items():
                try:
                    convert_value(values[name], kind)
                except ValueError as exc:
                    expected_errors.append((ordinal, name, str(exc), values))
                    break
    typed, errors = type_records(raws(*records), columns, first_ordinal=5)
    assert typed == expected_typed
    assert [list(r) for r in typed] == [list(columns) for _ in typed]
    assert [type(v) for r in typed for v in r.values()] == [
        type(v) for r in expected_typed for v in r.values()
    ]
    assert [(e.record, e.column, e.reason, e.raw) for e in errors] == expected_errors


@pytest.mark.parametrize(
    ("column_type", "value", "reason"),
    [
        ("int", "1,234", "not an int64: '1,234'"),  # a thousands separator
        ("int", "12.5", "not an int64: '12.5'"),  # a decimal
        ("int", "1e3", "not an int64: '1e3'"),
        ("date", "2024-01-02 10:00", "not an ISO date (YYYY-MM-DD): '2024-01-02 10:00'"),
        ("date", "2024-01-02T10:00:00Z", "not an ISO date (YYYY-MM-DD): '2024-01-02T10:00:00Z'"),
    ],
)
def test_a_value_a_declared_type_cannot_hold_is_a_row_error_never_converted(
    column_type: str, value: str, reason: str
) -> None:
    records = [RawRecord(7, {"c": value})]
    typed, errors = type_records(records, {"c": column_type}, first_ordinal=6)
    assert typed == []
    assert [(e.line, e.record, e.column, e.reason) for e in errors] == [(7, 6, "c", reason)]


INT_TEXTS = st.one_of(
    st.sampled_from(["0", "-0", "7", "-12", "007", "+1", "1_0", " 1", "1 ", "1\n2", "\n",
                     "\u0661", "9223372036854775807", "9223372036854775808",
                     "-9223372036854775808", "-9223372036854775809", "", "x"]),
    st.integers(-(2**65), 2**65).map(str),
    st.none(),
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(INT_TEXTS, max_size=30))
def test_property_typing_a_column_at_a_time_is_typing_each_value(texts):
    """The column-at-a-time int typing gives what `convert_value` gives value by value:
    the same records, and a row error for exactly the records with a bad value."""
    records = [RawRecord(i + 2, {"n": t}) for i, t in enumerate(texts)]
    typed, errors = type_records(records, {"n": "int"})
    want, bad = [], []
    for i, t in enumerate(texts):
        try:
            want.append({"n": convert_value(t, "int")})
        except ValueError:
            bad.append(i + 1)
    assert typed == want
    assert [e.record for e in errors] == bad


def test_a_batch_whose_int_column_is_all_null_is_typed_a_column_at_a_time(monkeypatch):
    """No fallback to the per-value path for a column without a value in the batch."""
    import dag.types

    def no_slow_path(*_args):
        raise AssertionError("converted value by value")

    monkeypatch.setitem(dag.types._CONVERTERS, "int", no_slow_path)
    records = [RawRecord(2, {"n": None, "m": "4"}), RawRecord(3, {"n": "", "m": "5"})]
    typed, errors = type_records(records, {"n": "int", "m": "int"})
    assert typed == [{"n": None, "m": 4}, {"n": None, "m": 5}] and errors == []
