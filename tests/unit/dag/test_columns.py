"""`dag.Columns`: typed records by column, a sequence of dicts for every other reader, whose
built records are the batch from then on; `column_values` of any batch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dag import Columns, column_values

NAMES = ["id", "name", "day"]
VALUES = st.one_of(st.none(), st.integers(), st.text(max_size=5))


def test_columns_read_as_records_in_names_order() -> None:
    batch = Columns(NAMES, [[1, 2], ["a", None], ["2024-01-02", "2024-01-03"]])
    assert len(batch) == 2 and not batch.built
    assert batch.column("name") == ["a", None]
    assert batch == [
        {"id": 1, "name": "a", "day": "2024-01-02"},
        {"id": 2, "name": None, "day": "2024-01-03"},
    ]
    assert list(batch[1]) == NAMES and batch.built


def test_built_records_are_the_batch_from_then_on() -> None:
    batch = Columns(NAMES, [[1, 2], ["a", "b"], [None, None]])
    batch[0]["name"] = "changed"  # a reader one record at a time changes the batch
    assert column_values(batch, ["name", "id"]) == [["changed", "b"], [1, 2]]
    with pytest.raises(RuntimeError, match="column_values"):
        batch.column("name")


def test_column_values_are_copies_and_missing_columns_null() -> None:
    batch = Columns(NAMES, [[1, 2], ["a", "b"], [None, "x"]])
    name, other = column_values(batch, ["name", "other"])
    name.append("more")
    assert batch.column("name") == ["a", "b"] and other == [None, None]


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="2 names for 1 columns"):
        Columns(["a", "b"], [[1]])
    with pytest.raises(ValueError, match="different lengths"):
        Columns(["a", "b"], [[1], [1, 2]])
    assert len(Columns([], [])) == 0


@given(st.lists(st.tuples(VALUES, VALUES, VALUES), max_size=20))
def test_columns_and_their_records_agree(rows: list[tuple]) -> None:
    records = [dict(zip(NAMES, row, strict=True)) for row in rows]
    columns = [list(c) for c in zip(*rows, strict=True)] if rows else [[], [], []]
    batch = Columns(NAMES, columns)
    assert column_values(batch, NAMES[::-1]) == column_values(records, NAMES[::-1])
    assert batch == records and len(batch) == len(records)
    assert column_values(batch, NAMES) == column_values(records, NAMES)  # built now
