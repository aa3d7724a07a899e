"""`trim` and `normalize_whitespace`: white space is what `str.isspace()` says (Unicode, so
NBSP, EM SPACE, tabs and newlines too). `trim` strips it at both ends; `normalize_whitespace`
also collapses every inner run to one ASCII space. Non-string columns hold no white space and
are left as they are; null stays null. Config: `columns`, a non-empty list of column names."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from operator import itemgetter, setitem
from typing import Any

from dag.columns import Columns, unbuilt
from dag.errors import FieldError
from dag.fieldchecks import check_name_list
from dag.ops.columnar import keep_nulls, with_column
from dag.ops.op import ColumnLineage, Derivation, Op
from dag.ops.schema import NAMES
from dag.ops.transform import Record, Transform, config_list, need_columns
from dag.records import RowError


class _Whitespace(Transform):
    def __init__(self, columns: list[str], input_columns: Mapping[str, str], collapse: bool):
        self.output_columns = dict(input_columns)
        # Only string columns can hold white space.
        self._columns = [c for c in columns if input_columns[c] == "string"]
        self._collapse = collapse

    def apply(
        self, records: Sequence[Record], first_ordinal: int = 1
    ) -> tuple[Sequence[Record], list[RowError]]:
        """A column at a time: a column of text only, none of it long, by C-level `map`s
        (no Python call per value); any other column value by value. A `Columns` not built
        stays one (`_apply_columns`)."""
        batch = unbuilt(records)
        if batch is not None:
            return self._apply_columns(batch), []
        out: list[Record] = list(map(dict, records))
        for name in self._columns:
            values = list(map(itemgetter(name), out))
            if None in values or max(map(len, values), default=0) > _COLLAPSE_SLICE:
                values = [None if v is None else self._one(v) for v in values]
            elif self._collapse:
                values = list(map(" ".join, map(str.split, values)))
            else:
                values = list(map(str.strip, values))
            deque(map(setitem, out, repeat(name), values), maxlen=0)
        return out, []

    def _apply_columns(self, batch: Columns) -> Columns:
        """The record path's values, a column at a time: a null is set aside as `""` and
        put back by C-level `map`s (no Python call per value), so a column with nulls
        takes the fast way too; only a column with a long value goes value by value."""
        for name in self._columns:
            values = batch.column(name)
            nulls = None in values
            texts = list(map(_NULL_AS_TEXT.get, values, values)) if nulls else values
            if max(map(len, texts), default=0) > _COLLAPSE_SLICE:
                cleaned: Iterable[str] = map(self._one, texts)
            elif self._collapse:
                cleaned = map(" ".join, map(str.split, texts))
            else:
                cleaned = map(str.strip, texts)
            if not nulls:
                batch = with_column(batch, name, list(cleaned))
            else:
                batch = with_column(batch, name, keep_nulls(values, cleaned))
        return batch

    def _one(self, value: str) -> str:
        if not self._collapse:
            return value.strip()
        if len(value) <= _COLLAPSE_SLICE:
            return " ".join(value.split())
        return _collapse_long(value)


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
# `map(_NULL_AS_TEXT.get, values, values)`: the values with `""` for None.
_NULL_AS_TEXT: dict[None, str] = {None: ""}


def _validate(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    if "columns" not in config:
        errors.append(FieldError(f"{path}.columns", "is required"))
    else:
        check_name_list(config["columns"], f"{path}.columns", errors, non_empty=True)


def _op(name: str, collapse: bool) -> Op:
    def build(config: Mapping[str, Any], input_columns: Mapping[str, str]) -> Transform:
        columns = config_list(config, "columns", name)
        need_columns(columns, input_columns, name)
        return _Whitespace(columns, input_columns, collapse=collapse)

    def lineage(config: Mapping[str, Any]) -> ColumnLineage:
        derived = {c: [Derivation(c, "DIRECT", "TRANSFORMATION", name)] for c in config["columns"]}
        return ColumnLineage(fields=derived)

    return Op(name, {"columns": NAMES}, ("columns",), _validate, build, lineage)


TRIM = _op("trim", collapse=False)
NORMALIZE_WHITESPACE = _op("normalize_whitespace", collapse=True)
OPS = (TRIM, NORMALIZE_WHITESPACE)
