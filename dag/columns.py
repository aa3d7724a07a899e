"""A batch of typed records held a column at a time (`Columns`), and the column values of any
batch of records (`column_values`).

A `Columns` is a sequence of records (dicts, keys in `names` order) for every consumer that
reads records one by one; the consumers on the hot path (typing, the transform ops, the
digests, the exports' encoders and staging) read and write its columns instead, with C-level
`map`s and no dict per record. The records are built on first use of the sequence, and from
then on they are the batch: a change to them shows in `column_values`, never a stale column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from operator import itemgetter
from typing import Any

from dag.records import BuiltOnUse

__all__ = [
    "INT_OR_NULL",
    "TEXT_OR_NULL",
    "Columns",
    "column_values",
    "record_at",
    "record_dicts",
    "unbuilt",
]

# The value types of a column of ints, or of text, that may hold nulls: a column's
# `set(map(type, values))` within one of these is read by the C-level fast paths.
INT_OR_NULL = frozenset({int, type(None)})
TEXT_OR_NULL = frozenset({str, type(None)})


class Columns(BuiltOnUse[dict[str, Any]]):
    """Typed records by column: `columns[i]` holds the values of `names[i]`, one per record,
    null as None. Equal to any sequence of the same records."""

    __slots__ = ("_columns", "_length", "_records", "names")

    def __init__(self, names: Sequence[str], columns: list[list[Any]]) -> None:
        if len(names) != len(columns):
            raise ValueError(f"{len(names)} names for {len(columns)} columns")
        lengths = set(map(len, columns))
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        self.names = list(names)
        self._columns = columns
        self._length = lengths.pop() if lengths else 0
        self._records: list[dict[str, Any]] | None = None

    @property
    def built(self) -> bool:
        """True once the records were built: the columns no longer speak for the batch."""
        return self._records is not None

    @property
    def columns(self) -> list[list[Any]]:
        """The columns, in `names` order; only while not `built` (else `column_values`)."""
        if self._records is not None:
            raise RuntimeError("the records were built: read the columns with column_values")
        return self._columns

    def column(self, name: str) -> list[Any]:
        """The values of column `name` (read-only: the batch shares it)."""
        return self.columns[self.names.index(name)]

    def records(self) -> list[dict[str, Any]]:
        """The records as dicts (built once; from then on they are the batch)."""
        if self._records is None:
            if not self.names:
                self._records = [{} for _ in range(self._length)]
            else:
                rows = zip(*self._columns, strict=True)
                self._records = list(map(dict, map(partial(zip, self.names), rows)))
            self._columns = []
        return self._records

    def _built(self) -> list[dict[str, Any]]:
        return self.records()

    def __len__(self) -> int:
        return self._length if self._records is None else len(self._records)

    def __repr__(self) -> str:
        state = "built" if self.built else "columns"
        return f"Columns({len(self)} records of {self.names!r}, {state})"


def unbuilt(records: Sequence[Any]) -> Columns | None:
    """`records` when it is a `Columns` whose records were not built (its columns speak for
    it), else None."""
    if isinstance(records, Columns) and not records.built:
        return records
    return None


def column_values(records: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[list[Any]]:
    """The values of `records` column by column, in `names` order, a missing column null; new
    lists. A `Columns` not built gives copies of its columns; any other batch is transposed
    by one C-level `itemgetter` pass per record, not a Python call per value."""
    if unbuilt(records) is not None:
        have = dict(zip(records.names, records.columns, strict=True))
        nulls = [None] * len(records)
        return [list(have.get(name, nulls)) for name in names]
    if len(names) > 1 and records:
        try:
            return [list(c) for c in zip(*map(itemgetter(*names), records), strict=True)]
        except KeyError:  # a record without some column (JSON): null there
            pass
    return [[record.get(name) for record in records] for name in names]


def record_at(records: Sequence[Mapping[str, Any]], i: int) -> Mapping[str, Any]:
    """Record `i` of a batch; of a `Columns` not built, that record alone (the batch stays
    by column), else `records[i]` itself."""
    if unbuilt(records) is not None:
        return dict(zip(records.names, [column[i] for column in records.columns], strict=True))
    return records[i]


def record_dicts(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The records of a batch as a list of dicts for a reader that needs dicts (orjson): of
    a `Columns` not built, new dicts, dropped after use (the batch stays by column for its
    other readers), built by C-level `map`s; else the records themselves, in a list."""
    if unbuilt(records) is not None:
        names = records.names
        rows = zip(*records.columns, strict=True) if names else [()] * len(records)
        return list(map(dict, map(partial(zip, names), rows)))
    return list(records)
