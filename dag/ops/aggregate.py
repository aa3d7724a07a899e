"""`aggregate`: count of records, and sum / min / max of the non-null values of an int
column, per `group_by` key (groups in first-seen order) or over everything. Sums are
exact while streaming; a sum outside int64 raises `Int64OverflowError` at `finish()`,
so the outcome depends neither on the batch split nor on the record order. An empty
input gives `{count: 0, sum: 0, min: null, max: null}` without `group_by` and no
records with it. Its checkpoint grows with the batch, not with the groups: each batch
stores one part, the groups it touched (`[key, count, sum, min, max]` as JSON), and the
checkpoint's state counts the parts that make up the state (`{"parts", "entries"}`);
restoring applies them in order. When the parts would hold more than twice as many
entries as there are groups, the batch's part is all groups instead and the count starts
again at one, so what is stored and read back stays within twice the groups."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from operator import is_not, itemgetter
from typing import Any

from dag.columns import unbuilt
from dag.errors import ConfigValueError, FieldError, Int64OverflowError
from dag.fieldchecks import check_name_list, quoted, require_str
from dag.limits import INT64_MAX, INT64_MIN
from dag.ops.op import ColumnLineage, Derivation, Op
from dag.ops.schema import NAME, one_of
from dag.ops.transform import Record, Transform, config_list, config_str, need_columns
from dag.records import RowError

# A value that is not null (`filter(_PRESENT, values)`: a C-level test per value).
_PRESENT = partial(is_not, None)
# The columns an aggregate adds to each group record; a group column may not reuse them.
AGGREGATE_OUTPUTS = ("count", "sum", "min", "max")


class _Aggregate(Transform):
    def __init__(self, config: Mapping[str, Any], input_columns: Mapping[str, str]):
        self._column = config_str(config, "column", "aggregate")
        self._group_by: list[str] = []
        if config.get("group_by") is not None:
            self._group_by = config_list(config, "group_by", "aggregate")
        need_columns([self._column, *self._group_by], input_columns, "aggregate")
        if input_columns[self._column] != "int":
            raise ConfigValueError(
                f"aggregate: column must be int, not {input_columns[self._column]}",
                column=self._column,
            )
        for name in self._group_by:
            if name in AGGREGATE_OUTPUTS:
                raise ConfigValueError(
                    f"aggregate: group_by column {name!r} clashes with an output column",
                    column=name,
                )
        if len(set(self._group_by)) != len(self._group_by):
            raise ConfigValueError("aggregate: group_by names a column twice")
        self.output_columns = {name: input_columns[name] for name in self._group_by}
        self.output_columns.update(dict.fromkeys(AGGREGATE_OUTPUTS, "int"))
        # group key -> [count, sum, min, max]; dicts keep first-seen order.
        self._groups: dict[tuple[Any, ...], list[Any]] = {}
        self._touched: list[tuple[Any, ...]] = []  # the keys of the last batch, in order
        self._parts = 0  # parts stored so far that make up the state
        self._entries = 0  # groups in those parts, counted with repeats

    def apply(
        self, records: Sequence[Record], first_ordinal: int = 1
    ) -> tuple[Sequence[Record], list[RowError]]:
        """The batch's values and group keys a column at a time (a `Columns` not built:
        its own lists; else C-level picks from the records), grouped, then `_accumulate`d."""
        column, group_by = self._column, self._group_by
        batch = unbuilt(records)
        if batch is not None:
            values = batch.column(column)
            keys: Iterable[Any] = map(batch.column, group_by)
        else:
            values = list(map(itemgetter(column), records))
            keys = (map(itemgetter(name), records) for name in group_by)
        self._accumulate(_by_key(values, list(keys)))
        return [], []

    def _accumulate(self, by_key: Mapping[tuple, list]) -> None:
        """Add each group's values of a batch to its count, sum, min and max."""
        groups = self._groups
        for key, bucket in by_key.items():
            acc = groups.get(key)
            if acc is None:
                acc = groups[key] = [0, 0, None, None]
            acc[0] += len(bucket)
            present = list(filter(_PRESENT, bucket)) if None in bucket else bucket
            if present:
                acc[1] += sum(present)  # Python ints are exact; the range is checked at finish()
                low, high = min(present), max(present)
                acc[2] = low if acc[2] is None else min(acc[2], low)
                acc[3] = high if acc[3] is None else max(acc[3], high)
        self._touched = list(by_key)

    def state(self) -> dict[str, Any]:
        return {"groups": self._entries_of(self._groups)}

    def checkpoint(self) -> tuple[dict[str, Any], tuple[int, bytes]]:
        groups, touched = self._groups, self._touched
        if self._entries + len(touched) > 2 * len(groups):
            self._parts, self._entries, part = 0, 0, self._entries_of(groups)
        else:
            part = self._entries_of({key: groups[key] for key in touched})
        index = self._parts
        self._parts += 1
        self._entries += len(part)
        self._touched = []
        # Sums are exact Python ints, maybe beyond 64 bits until finish(): stdlib json.
        return {"parts": self._parts, "entries": self._entries}, (index, json.dumps(part).encode())

    @staticmethod
    def _entries_of(groups: Mapping[tuple[Any, ...], list[Any]]) -> list[list[Any]]:
        return [[list(key), *acc] for key, acc in groups.items()]

    def restore(self, state: Any, parts: Sequence[bytes] = ()) -> None:
        self._groups, self._parts, self._entries = {}, 0, 0
        if state is None:  # no checkpoint yet: start empty
            return
        if "groups" in state:  # the whole state in the checkpoint (as before parts)
            self._groups = {tuple(key): list(acc) for key, *acc in state["groups"]}
            self._entries = len(self._groups)
            return
        if len(parts) != state["parts"]:
            raise ValueError(
                f"aggregate state: {len(parts)} parts, the checkpoint names {state['parts']}"
            )
        groups = self._groups
        for part in parts:  # later parts hold later values; new keys in first-seen order
            for key, *acc in json.loads(part):
                groups[tuple(key)] = acc
        self._parts, self._entries = state["parts"], state["entries"]

    def finish(self) -> list[Record]:
        groups = self._groups
        if not groups and not self._group_by:
            groups = {(): [0, 0, None, None]}
        out: list[Record] = []
        for key, (count, total, low, high) in groups.items():
            if not INT64_MIN <= total <= INT64_MAX:
                raise Int64OverflowError(
                    f"sum of {self._column!r} is outside int64: {total}", column=self._column
                )
            record = dict(zip(self._group_by, key, strict=True))
            record.update(count=count, sum=total, min=low, max=high)
            out.append(record)
        return out


def _by_key(values: list[Any], key_columns: list[Iterable[Any]]) -> dict[tuple, list]:
    """The `values` of each group key (the tuple of the key columns' values), keys in
    first-seen order. One key column: each value goes to its key's list by C-level `map`s,
    the key wrapped in its tuple once per group; more: a loop over their `zip` (measured
    faster than the `map`s for tuple keys, bench/README.md)."""
    if not key_columns:
        return {(): values} if values else {}
    if len(key_columns) == 1:
        by_value: defaultdict[Any, list] = defaultdict(list)
        deque(map(list.append, map(by_value.__getitem__, key_columns[0]), values), maxlen=0)
        return {(key,): bucket for key, bucket in by_value.items()}
    by_key: dict[tuple, list] = {}
    for key, value in zip(zip(*key_columns, strict=True), values, strict=True):
        bucket = by_key.get(key)
        if bucket is None:
            by_key[key] = [value]
        else:
            bucket.append(value)
    return by_key


def _validate(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    require_str(config, "column", path, errors)
    if "group_by" not in config:
        return
    group_by = config["group_by"]
    if check_name_list(group_by, f"{path}.group_by", errors, non_empty=False):
        for k, column in enumerate(group_by):
            if column in AGGREGATE_OUTPUTS:
                errors.append(
                    FieldError(
                        f"{path}.group_by[{k}]",
                        f"{column!r} clashes with an aggregate output column "
                        f"({quoted(AGGREGATE_OUTPUTS)})",
                    )
                )


def _lineage(config: Mapping[str, Any]) -> ColumnLineage:
    """Group columns as they are, count/sum/min/max from `column`, the grouping for the
    whole dataset; nothing else passes through."""
    lineage = ColumnLineage(identity_rest=False)
    for column in config.get("group_by") or []:
        lineage.fields[column] = [Derivation(column, "DIRECT", "IDENTITY")]
        lineage.dataset.append(Derivation(column, "INDIRECT", "GROUP_BY"))
    for measure in AGGREGATE_OUTPUTS:
        lineage.fields[measure] = [Derivation(config["column"], "DIRECT", "AGGREGATION", measure)]
    return lineage


_GROUP_BY = {
    "type": "array",
    "uniqueItems": True,
    "items": {**NAME, "not": one_of(AGGREGATE_OUTPUTS)},
}
AGGREGATE = Op(
    "aggregate",
    {"column": NAME, "group_by": _GROUP_BY},
    ("column",),
    _validate,
    _Aggregate,
    _lineage,
)
OPS = (AGGREGATE,)
