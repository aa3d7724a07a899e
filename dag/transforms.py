"""The fixed set of record transforms, applied one batch at a time.

`build_transform(config, input_columns)` checks the config against the input columns
(a column that is not there, a filter literal that does not fit the column type, an
aggregate over a non-int column raise `ConfigValueError`) and returns a `Transform`:

- `output_columns`: the ordered column types of its output;
- `apply(records, first_ordinal) -> (records, row_errors)`: one batch in, never mutating
  it; `records[i]` has ordinal `first_ordinal + i` in the step's input;
- `state()` / `restore(state, parts)`: a JSON-able state for the checkpoint (`None` for
  every transform but `aggregate`); `checkpoint()`: the state for a batch's checkpoint and
  the part of it to store with that batch (`aggregate`: see below);
- `finish()`: records only known at the end of the input (`aggregate`; else none).

Ops (docs/plan-format.md has the config shapes):

- `trim`, `normalize_whitespace`: white space is what `str.isspace()` says (Unicode, so
  NBSP, EM SPACE, tabs and newlines too). `trim` strips it at both ends;
  `normalize_whitespace` also collapses every inner run to one ASCII space. Non-string
  columns hold no white space and are left as they are; null stays null.
- `map`: looks `str(value)` up in `mapping` (keys are strings; an int 7 matches "7"). An
  unmapped value, null included, becomes `default` if one is given, else passes
  unchanged. The output goes to `into` (appended as a new column, or replacing that
  column's values and type) or back into `column`. Its type is `int` if every mapping
  value and the default are ints (or null) and, when unmapped values pass through, the
  source column is `int`; else `string`, with ints written as decimal text.
- `filter_eq`: keeps records whose value equals the literal converted to the column type
  (`"1"` matches 1 in an int column; a JSON literal becomes its JSON text for a string
  column); the literal null keeps the null values.
- `parse_date`: a string (or date) column becomes `date`; a value that is not an ISO
  `YYYY-MM-DD` calendar date is a row error and its record is dropped; `""` is null.
- `aggregate`: count of records, and sum / min / max of the non-null values of an int
  column, per `group_by` key (groups in first-seen order) or over everything. Sums are
  exact while streaming; a sum outside int64 raises `Int64OverflowError` at `finish()`,
  so the outcome depends neither on the batch split nor on the record order. An empty
  input gives `{count: 0, sum: 0, min: null, max: null}` without `group_by` and no
  records with it. Its checkpoint grows with the batch, not with the groups: each batch
  stores one part, the groups it touched (`[key, count, sum, min, max]` as JSON), and the
  checkpoint's state counts the parts that make up the state (`{"parts", "entries"}`);
  restoring applies them in order. When the parts would hold more than twice as many
  entries as there are groups, the batch's part is all groups instead and the count starts
  again at one, so what is stored and read back stays within twice the groups.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from dag.errors import ConfigValueError, Int64OverflowError
from dag.limits import INT64_MAX, INT64_MIN
from dag.records import RowError
from dag.types import convert_value

__all__ = ["AGGREGATE_OUTPUTS", "Transform", "build_transform"]

Record = dict[str, Any]
# The columns an aggregate adds to each group record; a group column may not reuse them.
AGGREGATE_OUTPUTS = ("count", "sum", "min", "max")


class Transform:
    """A built transform: the identity, stateless; each op overrides `apply` and, when it
    streams state across batches, `state`/`restore`/`finish`."""

    output_columns: dict[str, str]

    def apply(
        self, records: Sequence[Record], first_ordinal: int = 1
    ) -> tuple[list[Record], list[RowError]]:
        """The batch's output records (new dicts; the input is never mutated) and the row
        errors of records that were dropped."""
        return list(records), []

    def state(self) -> Any:
        """JSON-able state to put in a checkpoint (`None`: nothing to keep)."""
        return None

    def restore(self, state: Any, parts: Sequence[bytes] = ()) -> None:
        """Continue from a `state()` or `checkpoint()` state taken earlier (possibly in
        another process), with the parts stored with it, in order; `None` means from the
        start."""

    def checkpoint(self) -> tuple[Any, tuple[int, bytes] | None]:
        """After a batch: the state for its checkpoint and the part to store with it
        (its index and bytes; None: the state holds everything)."""
        return self.state(), None

    def finish(self) -> list[Record]:
        """Records emitted once the whole input went through `apply`."""
        return []


def _need_columns(names: Sequence[str], input_columns: Mapping[str, str], op: str) -> None:
    for name in names:
        if name not in input_columns:
            raise ConfigValueError.missing_column(
                f"{op}: no column {name!r} in the input", name, input_columns
            )


def _config_list(config: Mapping[str, Any], key: str, op: str) -> list[str]:
    value = config.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigValueError(f"{op}: {key!r} must be a list of column names")
    return list(value)


def _config_str(config: Mapping[str, Any], key: str, op: str) -> str:
    value = config.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigValueError(f"{op}: {key!r} must be a column name")
    return value


class _Whitespace(Transform):
    def __init__(self, columns: list[str], input_columns: Mapping[str, str], collapse: bool):
        self.output_columns = dict(input_columns)
        # Only string columns can hold white space.
        self._columns = [c for c in columns if input_columns[c] == "string"]
        self._collapse = collapse

    def apply(
        self, records: Sequence[Record], first_ordinal: int = 1
    ) -> tuple[list[Record], list[RowError]]:
        columns, join, strip = self._columns, " ".join, str.strip
        out: list[Record] = []
        for record in records:
            record = dict(record)
            for name in columns:
                value = record[name]
                if value is None:
                    continue
                if not self._collapse:
                    record[name] = strip(value)
                elif len(value) <= _COLLAPSE_SLICE:
                    record[name] = join(value.split())
                else:
                    record[name] = _collapse_long(value)
            out.append(record)
        return out, []


def _collapse_long(value: str) -> str:
    """`" ".join(value.split())` of a long value, a slice of about `_COLLAPSE_SLICE`
    characters (cut at white space) at a time: never a list of all its words (a 30 MiB text
    is 10 million of them, 800 MiB). The value itself when nothing changes, so a chain of
    such steps holds one copy of it."""
    parts, i, n = [], 0, len(value)
    while i < n:
        space = _SPACE.search(value, min(i + _COLLAPSE_SLICE, n))
        j = space.start() if space else n
        words = value[i:j].split()
        if words:
            parts.append(" ".join(words))
        i = j
    collapsed = " ".join(parts)
    return value if collapsed == value else collapsed


_COLLAPSE_SLICE = 1 << 16
_SPACE = re.compile(r"\s")  # the white space of str.split() and str.isspace()


class _Map(Transform):
    def __init__(self, config: Mapping[str, Any], input_columns: Mapping[str, str]):
        self._column = _config_str(config, "column", "map")
        _need_columns([self._column], input_columns, "map")
        mapping = config.get("mapping")
        if not isinstance(mapping, Mapping) or not all(isinstance(k, str) for k in mapping):
            raise ConfigValueError("map: 'mapping' must be an object with string keys")
        self._into = config.get("into") or self._column
        if not isinstance(self._into, str):
            raise ConfigValueError("map: 'into' must be a column name")
        self._has_default = "default" in config
        default = config.get("default")
        results = [*mapping.values(), *([default] if self._has_default else [])]
        int_out = all(v is None or type(v) is int for v in results) and (
            self._has_default or input_columns[self._column] == "int"
        )
        self._type = "int" if int_out else "string"
        try:
            self._mapping = {k: convert_value(v, self._type) for k, v in mapping.items()}
            self._default = convert_value(default, self._type)
        except ValueError as exc:
            raise ConfigValueError(f"map: {exc}", column=self._column) from None
        self._key_of_int = input_columns[self._column] == "int"
        self.output_columns = dict(input_columns)
        self.output_columns[self._into] = self._type

    def apply(
        self, records: Sequence[Record], first_ordinal: int = 1
    ) -> tuple[list[Record], list[RowError]]:
        out: list[Record] = []
        mapping, column, into = self._mapping, self._column, self._into
        for record in records:
            value = record[column]
            key = str(value) if self._key_of_int and value is not None else value
            if key in mapping:
                result = mapping[key]
            elif self._has_default:
                result = self._default
            elif self._type == "string" and value is not None:
                result = str(value)  # an int passing through into a string column
            else:
                result = value
            record = dict(record)
            record[into] = result
            out.append(record)
        return out, []


class _FilterEq(Transform):
    def __init__(self, config: Mapping[str, Any], input_columns: Mapping[str, str]):
        self._column = _config_str(config, "column", "filter_eq")
        _need_columns([self._column], input_columns, "filter_eq")
        if "value" not in config:
            raise ConfigValueError("filter_eq: 'value' is required", column=self._column)
        literal = config["value"]
        column_type = input_columns[self._column]
        try:
            self._value = None if literal is None else convert_value(literal, column_type)
        except ValueError as exc:
            raise ConfigValueError(
                f"filter_eq: the literal does not fit the {column_type} column: {exc}",
                column=self._column,
            ) from None
        if self._value is None and literal is not None:
            # "" converts to null for int/date; matching null there would surprise.
            raise ConfigValueError(
                f"filter_eq: {literal!r} is not a {column_type} value", column=self._column
            )
        self.output_columns = dict(input_columns)

    def apply(
        self, records: Sequence[Record], first_ordinal: int = 1
    ) -> tuple[list[Record], list[RowError]]:
        column, value = self._column, self._value
        return [r for r in records if r[column] == value], []


class _ParseDate(Transform):
    def __init__(self, config: Mapping[str, Any], input_columns: Mapping[str, str]):
        self._column = _config_str(config, "column", "parse_date")
        _need_columns([self._column], input_columns, "parse_date")
        if input_columns[self._column] == "int":
            raise ConfigValueError(
                "parse_date: needs a string column, not int", column=self._column
            )
        self.output_columns = dict(input_columns)
        self.output_columns[self._column] = "date"

    def apply(
        self, records: Sequence[Record], first_ordinal: int = 1
    ) -> tuple[list[Record], list[RowError]]:
        out: list[Record] = []
        errors: list[RowError] = []
        column = self._column
        for index, record in enumerate(records):
            try:
                value = convert_value(record[column], "date")
            except ValueError as exc:
                errors.append(
                    RowError(
                        str(exc), record=first_ordinal + index, column=column, raw=dict(record)
                    )
                )
                continue
            record = dict(record)
            record[column] = value
            out.append(record)
        return out, errors


class _Aggregate(Transform):
    def __init__(self, config: Mapping[str, Any], input_columns: Mapping[str, str]):
        self._column = _config_str(config, "column", "aggregate")
        self._group_by: list[str] = []
        if config.get("group_by") is not None:
            self._group_by = _config_list(config, "group_by", "aggregate")
        _need_columns([self._column, *self._group_by], input_columns, "aggregate")
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
    ) -> tuple[list[Record], list[RowError]]:
        groups, column, group_by = self._groups, self._column, self._group_by
        # The batch's values by group (C-level picks), then each group's values at once.
        values = list(map(itemgetter(column), records))
        if not group_by:
            keys: Iterable[tuple] = [()] * len(values)
        elif len(group_by) == 1:
            keys = zip(map(itemgetter(group_by[0]), records))
        else:
            keys = map(itemgetter(*group_by), records)
        by_key: dict[tuple, list] = {}
        for key, value in zip(keys, values, strict=True):
            bucket = by_key.get(key)
            if bucket is None:
                by_key[key] = [value]
            else:
                bucket.append(value)
        for key, bucket in by_key.items():
            acc = groups.get(key)
            if acc is None:
                acc = groups[key] = [0, 0, None, None]
            acc[0] += len(bucket)
            present = [v for v in bucket if v is not None]
            if present:
                acc[1] += sum(present)  # Python ints are exact; the range is checked at finish()
                low, high = min(present), max(present)
                acc[2] = low if acc[2] is None else min(acc[2], low)
                acc[3] = high if acc[3] is None else max(acc[3], high)
        self._touched = list(by_key)
        return [], []

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


def build_transform(config: Mapping[str, Any], input_columns: Mapping[str, str]) -> Transform:
    """A `Transform` for `config` (`{"op": ...}`) over records with `input_columns`."""
    op = config.get("op")
    if op in ("trim", "normalize_whitespace"):
        columns = _config_list(config, "columns", op)
        _need_columns(columns, input_columns, op)
        return _Whitespace(columns, input_columns, collapse=op == "normalize_whitespace")
    if op == "map":
        return _Map(config, input_columns)
    if op == "filter_eq":
        return _FilterEq(config, input_columns)
    if op == "parse_date":
        return _ParseDate(config, input_columns)
    if op == "aggregate":
        return _Aggregate(config, input_columns)
    raise ConfigValueError(f"unknown transform op {op!r}")
