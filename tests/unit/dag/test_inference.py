"""Column inference over a whole input (dag.inference) and null markers (dag.types.null_out):
a type never depends on which records come first, and its evidence names the value that
ruled a type out."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dag.inference import ColumnInference, infer_columns
from dag.records import ColumnRecords, RawRecord
from dag.types import convert_value, null_out


def _records(column: str, values: list, first_line: int = 2) -> list[RawRecord]:
    return [RawRecord(first_line + i, {column: v}) for i, v in enumerate(values)]


def test_a_value_far_down_the_input_decides_the_type() -> None:
    inference = ColumnInference(["t"])
    inference.observe(_records("t", [str(i) for i in range(500)]))
    inference.observe(_records("t", ["12", "NA", "7"], first_line=502))
    assert inference.columns() == {"t": "string"}
    assert inference.evidence() == {
        "t": "string: 'NA' at line 503 is not an int64, '0' at line 2 is not an ISO date"
    }


def test_null_markers_are_null_before_inference() -> None:
    records = _records("t", ["1", "NA", "", None, "\\N", "20"])
    null_out(records, ["NA", "\\N"])
    assert [r.values["t"] for r in records] == ["1", None, "", None, None, "20"]
    inference = ColumnInference(["t"])
    inference.observe(records)
    assert inference.columns() == {"t": "int"}
    assert inference.evidence() == {"t": "int: all 2 value(s) are int64"}
    null_out(records, [])  # nothing to do
    assert [r.values["t"] for r in records][:2] == ["1", None]


def test_dates_the_range_of_int64_and_evidence() -> None:
    inference = ColumnInference(["d", "big", "over", "none", "num"], declared={"num": "int"})
    rows = [
        {"d": "2024-01-31", "big": "9223372036854775807", "over": "9223372036854775808",
         "none": None, "num": "x"},
        {"d": "2024-02-29", "big": "-9223372036854775808", "over": "1", "none": "", "num": "1"},
    ]  # fmt: skip
    inference.observe([RawRecord(2 + i, r) for i, r in enumerate(rows)])
    assert inference.columns() == {
        "d": "date", "big": "int", "over": "string", "none": "string", "num": "int",
    }  # fmt: skip
    evidence = inference.evidence()
    assert evidence["d"] == (
        "date: all 2 value(s) are ISO dates (line 2: '2024-01-31' is not an int64)"
    )
    assert evidence["none"] == "string: no value (every one is null)"
    assert "num" not in evidence  # declared
    assert infer_columns(["d"], [RawRecord(2, {"d": "2023-02-29"})]) == {"d": "string"}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.integers(-(2**63), 2**63 - 1).map(str),
            st.sampled_from(
                ["NA", "007", "1.5", "1,234", "2024-01-02", "2024-13-01", "", "-0", " 1"]
            ),
        ),
        max_size=60,
    ),
    st.integers(1, 60),
)
def test_the_type_never_depends_on_how_the_input_is_cut_into_batches(values, cut) -> None:
    records = _records("c", values)
    whole = ColumnInference(["c"])
    whole.observe(records)
    pieces = ColumnInference(["c"])
    for i in range(0, len(records), cut):
        pieces.observe(records[i : i + cut])
    assert pieces.columns() == whole.columns()
    assert pieces.evidence() == whole.evidence()
    present = [v for v in values if v not in (None, "")]
    ints = present and all(
        v.lstrip("-").isdigit() and v == str(int(v)) and v != "-0" for v in present
    )
    if ints:
        assert whole.columns() == {"c": "int"}


def test_a_value_with_a_line_end_is_never_an_int() -> None:
    """`"1\n2"` (a quoted CSV field) joined with the other values reads as two int lines:
    it is checked by itself, and the column is a string (typing would reject it)."""
    for records in (
        ColumnRecords(["c"], [["1", "1\n2", "3"]], 2),
        _records("c", ["1", "1\n2", "3"]),
    ):
        inference = ColumnInference(["c"])
        inference.observe(records)
        assert inference.columns() == {"c": "string"}
        assert inference.evidence() == {
            "c": "string: '1\\n2' at line 3 is not an int64, '1' at line 2 is not an ISO date"
        }


TEXTS = st.one_of(
    st.none(),
    st.integers(-(2**63) - 2, 2**63 + 1).map(str),
    st.sampled_from(["", "NA", "007", "-0", "1\n2", "\n", "2024-02-29", "2023-02-29",
                     "2024-01-02\n2024-01-03", "0000-01-01", "x", " 1", "\u0661"]),
)  # fmt: skip


def _reference(values: list[tuple[int, object]]) -> tuple[str, int, tuple | None, tuple | None]:
    """Type, count of present values, and the first non-int and non-date (line, value), value
    by value (`convert_value`)."""
    present = [(line, v) for line, v in values if v is not None and v != ""]
    firsts = []
    for column_type in ("int", "date"):
        failing = None
        for line, value in present:
            try:
                convert_value(value, column_type)
            except ValueError:
                failing = (line, value)
                break
        firsts.append(failing)
    kind = "string" if not present else "int" if firsts[0] is None else "date"
    kind = "string" if kind == "date" and firsts[1] is not None else kind
    return kind, len(present), firsts[0], firsts[1]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(TEXTS, min_size=1, max_size=12), max_size=6))
def test_property_inference_agrees_with_a_value_by_value_reference(batches) -> None:
    """Batches read a column at a time, their values joined and checked in C, give the type,
    count and evidence of checking every value by itself."""
    inference, line, lined = ColumnInference(["c"]), 2, []
    for values in batches:
        inference.observe(ColumnRecords(["c"], [list(values)], line))
        lined += [(line + i, v) for i, v in enumerate(values)]
        line += len(values)
    kind, count, not_int, not_date = _reference(lined)
    assert inference.columns() == {"c": kind}
    doubt = inference._doubts["c"]
    assert (doubt.not_int, doubt.not_date) == (not_int, not_date)
    assert doubt.values == count or kind == "string"  # a string's later values go uncounted
    assert (doubt.values > 0) == (count > 0)


MARKED = st.one_of(st.none(), st.sampled_from(["", "NA", "a", "b", "a\nb", "\n", "NAN", "x"]))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(MARKED, min_size=1, max_size=10), min_size=1, max_size=3),
    st.sets(st.sampled_from(["NA", "a\nb", "", "\n", "b", "\\N"]), max_size=3),
)
def test_property_null_out_of_columns_is_value_by_value(columns, markers) -> None:
    """Markers found in a column's joined text (even across values, as `a\\nb` is in `a`,
    `b`) null exactly the values equal to one, as the record by record path does."""
    length = min(map(len, columns))
    columns = [c[:length] for c in columns]
    header = [f"h{i}" for i in range(len(columns))]
    by_column = ColumnRecords(header, [list(c) for c in columns], 2)
    null_out(by_column, markers)
    assert not by_column.built
    expected = [[None if v in markers else v for v in c] for c in columns]
    assert by_column.columns == expected
