"""Column inference over a whole input (dag.inference) and null markers (dag.types.null_out):
a type never depends on which records come first, and its evidence names the value that
ruled a type out."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dag.inference import ColumnInference, infer_columns
from dag.records import RawRecord
from dag.types import null_out


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
