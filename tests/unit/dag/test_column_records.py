"""A batch read a column at a time (`dag.records.ColumnRecords`) gives what the same
records as `RawRecord`s give: null markers, inference (types and evidence lines) and typing
(records and row errors), whatever the values (hypothesis)."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from dag.inference import ColumnInference
from dag.records import ColumnRecords, RawRecord
from dag.types import null_out, type_records

VALUE = st.one_of(
    st.none(),
    st.sampled_from(["", "0", "7", "-12", "-0", "007", "NA", "9223372036854775808",
                     "2024-02-29", "2023-02-29", "0000-01-01", "x", " 1"]),
)  # fmt: skip
HEADER = ["a", "b", "c"]


@st.composite
def batches(draw):
    n = draw(st.integers(1, 30))
    return [draw(st.lists(VALUE, min_size=n, max_size=n)) for _ in HEADER], draw(st.integers(1, 9))


def both(columns: list[list], first_line: int) -> tuple[ColumnRecords, list[RawRecord]]:
    by_column = ColumnRecords(HEADER, copy.deepcopy(columns), first_line)
    rows = zip(*columns, strict=True)
    listed = [
        RawRecord(first_line + i, dict(zip(HEADER, row, strict=True))) for i, row in enumerate(rows)
    ]
    return by_column, listed


@settings(max_examples=300, deadline=None)
@given(batches(), st.sampled_from([(), ("NA",), ("NA", "x")]))
def test_property_columns_and_records_agree(batch, nulls):
    columns, first_line = batch
    by_column, listed = both(columns, first_line)
    null_out(by_column, nulls)
    null_out(listed, nulls)
    assert not by_column.built  # the column paths ran, not the records'
    seen = [ColumnInference(HEADER, {"c": "string"}) for _ in range(2)]
    seen[0].observe(by_column)
    seen[1].observe(listed)
    assert seen[0].columns() == seen[1].columns()
    assert seen[0].evidence() == seen[1].evidence()
    types = seen[1].columns()
    assert type_records(by_column, types, first_ordinal=5) == type_records(
        listed, types, first_ordinal=5
    )
    assert list(by_column) == listed  # built at last: the same records and lines


def test_records_are_built_once_and_then_the_columns_are_theirs():
    records = ColumnRecords(HEADER, [["1", "2"], ["NA", None], ["x", "y"]], 10)
    assert len(records) == 2 and records[1] == RawRecord(11, {"a": "2", "b": None, "c": "y"})
    assert records.built
    null_out(records, ("NA",))  # after building, the records are changed, not the columns
    assert records[0].values["b"] is None
