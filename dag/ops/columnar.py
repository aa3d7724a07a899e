"""What the ops share to work on a batch a column at a time (a `Columns` whose records were
not built: `dag.columns.unbuilt`): the output batches made from it without a dict per
record (a column replaced or added, the records of a mask kept).

An output `Columns` holds new lists for the columns an op changes and shares the others
with its input: nothing changes a batch's column lists in place (`Columns.column` and
`Columns.columns` are read-only; `column_values` copies; building the records leaves the
lists as they are), so a shared list is never seen to change by either batch."""

from __future__ import annotations

from itertools import compress
from operator import itemgetter
from typing import Any

from dag.columns import Columns

# `list(map(_NULL.get, values, others))`: None where `values` holds None, else `others`
# (a C-level choice per value; only None equals None).
_NULL: dict[Any, Any] = {None: None}


def with_column(batch: Columns, name: str, values: list[Any]) -> Columns:
    """`batch` with column `name` replaced by `values`, or added last when it has none
    (the order a record's `record[name] = value` gives)."""
    names, columns = list(batch.names), list(batch.columns)
    if name in names:
        columns[names.index(name)] = values
    else:
        names.append(name)
        columns.append(values)
    return Columns(names, columns)


def keep_nulls(values: list[Any], others: Any) -> list[Any]:
    """None where `values` is None, else the value of `others` at that place."""
    return list(map(_NULL.get, values, others))


def kept(batch: Columns, mask: list[Any]) -> Columns:
    """The records of `batch` whose `mask` value is true, in order (all of them: the same
    column lists). Up to two in three go by `kept_at`; more by one `compress` per column
    (the faster way there, bench/README.md)."""
    picked = list(compress(range(len(mask)), mask))
    if len(picked) * 3 > len(mask) * 2 and len(picked) < len(mask):
        return Columns(batch.names, [list(compress(c, mask)) for c in batch.columns])
    return kept_at(batch, picked)


def kept_at(batch: Columns, picked: list[int]) -> Columns:
    """The records of `batch` at the ascending indexes `picked` (all of them: the same
    column lists), each column's by one `itemgetter`."""
    columns = batch.columns
    if len(picked) == len(batch):
        return Columns(batch.names, list(columns))
    if len(picked) > 1:
        pick = itemgetter(*picked)
        return Columns(batch.names, [list(pick(c)) for c in columns])
    return Columns(batch.names, [[c[i] for i in picked] for c in columns])


def positions(values: list[Any], value: Any, count: int) -> list[int]:
    """The indexes of the `count` values equal to `value` (`values.count(value)`),
    ascending, found by C-level `list.index` scans: a Python step per match only."""
    found, i = [], -1
    index = values.index
    for _ in range(count):
        i = index(value, i + 1)
        found.append(i)
    return found
