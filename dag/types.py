"""Column types: the conversion of every raw record to its columns' types.

Types are `int` (int64), `string` and `date` (ISO `YYYY-MM-DD`, kept as that validated
string); every column is nullable. Conversion rules, the same for declared and inferred
columns:

- null: `None` is null in every column. The empty string (a quoted `""` in CSV, `""` in
  JSON) stays `""` in a string column and is null in an int or date column.
- int: a JSON int (not a bool, not a float) or text in canonical decimal form: an optional
  `-`, then `0` or digits not starting with `0` (no `+`, no spaces, no leading zeros, so
  `007` is not an int and inference keeps such columns as strings without losing the
  zeros). The bounds are exact: -9223372036854775808 .. 9223372036854775807.
- date: text `YYYY-MM-DD` (ASCII digits) that is a real calendar date (no `2023-02-29`).
- string: text as is; a JSON number or bool becomes its JSON text (`1.5`, `true`), and a
  JSON array or object its compact JSON text.

Inference of undeclared columns over a whole input is `dag.inference`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import date
from typing import Any

from dag.columns import TEXT_OR_NULL, Columns, column_values
from dag.limits import INT64_MAX, INT64_MIN
from dag.records import ColumnRecords, RawRecord, RowError

__all__ = [
    "COLUMN_TYPES",
    "ISO_DATE_TEXT",
    "convert_value",
    "null_out",
    "show_value",
    "type_records",
]

COLUMN_TYPES = ("int", "string", "date")
# The shape of a date (ASCII digits only: `\d` would take other scripts' digits too).
ISO_DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")

_INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")
# What str() gives back for an int, one per line: `0`, or digits without a leading zero,
# with a minus sign or not (not `-0`, `+1`, `1_000`, ` 1` or other scripts' digits).
_CANONICAL_INTS = re.compile(r"(?:(?:0|-?[1-9][0-9]*)\n)*")
# Longer text cannot be in range, and int() refuses very long digit strings anyway.
_INT_TEXT_MAX_LEN = len(str(INT64_MIN))


def _to_int(value: Any) -> int | None:
    kind = type(value)
    if kind is int:
        number = value
    elif kind is str:
        if value == "":
            return None
        if len(value) > _INT_TEXT_MAX_LEN or not _INT_TEXT.fullmatch(value):
            raise ValueError(f"not an int64: {show_value(value)}")
        number = int(value)
    elif value is None:
        return None
    else:
        raise ValueError(f"not an int64: {show_value(value)}")
    if not INT64_MIN <= number <= INT64_MAX:
        raise ValueError(f"not an int64: {show_value(value)} is out of range")
    return number


def _to_date(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if type(value) is not str or not ISO_DATE_TEXT.fullmatch(value):
        raise ValueError(f"not an ISO date (YYYY-MM-DD): {show_value(value)}")
    try:
        date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"not a valid calendar date: {show_value(value)}") from None
    return value


def _to_string(value: Any) -> str | None:
    if value is None or type(value) is str:
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def show_value(value: Any) -> str:
    """A value as a message shows it: a string's repr, cut after `_SHOWN_CHARS` characters
    (a 50 MiB value would otherwise be copied into every message about it)."""
    if isinstance(value, str):
        if len(value) > _SHOWN_CHARS:
            return f"{value[:_SHOWN_CHARS]!r}\u2026 ({len(value)} chars)"
        return repr(value)
    return _to_string(value) or "null"


_SHOWN_CHARS = 80


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "int": _to_int,
    "string": _to_string,
    "date": _to_date,
}


def convert_value(value: Any, column_type: str) -> int | str | None:
    """`value` as a value of `column_type`; raises `ValueError(reason)` if it is not one."""
    return _CONVERTERS[column_type](value)


def type_records(
    records: Sequence[RawRecord],
    columns: Mapping[str, str],
    *,
    first_ordinal: int = 1,
) -> tuple[Sequence[dict[str, Any]], list[RowError]]:
    """Convert raw records to typed records (keys in column order).

    `records[i]` has ordinal `first_ordinal + i`. A record with a value that fails its
    column type is left out of `typed` and reported once, as a `RowError` naming its
    first bad column, with the record's raw values as `raw`.
    """
    fast = _type_columns(records, columns)
    if fast is not None:
        return fast, []
    converters = [(name, _CONVERTERS[column_type]) for name, column_type in columns.items()]
    typed: list[dict[str, Any]] = []
    errors: list[RowError] = []
    for index, record in enumerate(records):
        values = record.values
        try:
            typed.append({name: convert(values.get(name)) for name, convert in converters})
        except ValueError:
            errors.append(_row_error(record, first_ordinal + index, converters))
    return typed, errors


def _type_columns(records: Sequence[RawRecord], columns: Mapping[str, str]) -> Columns | None:
    """`type_records` of a batch without a bad value, a column at a time with C-level
    `map`s instead of a Python call per value. Nulls (`None`, and `""` in an int or date
    column) are set aside and the rest converted in one go. None when a column holds
    anything but text and null: the caller then converts record by record."""
    if not records or not columns:
        return None
    names = list(columns)
    if isinstance(records, ColumnRecords) and not records.built:
        # read so: no transposition (copies: the batch's columns stay as they were read)
        by_column = [list(records.column(name)) for name in names]
    else:
        by_column = column_values([record.values for record in records], names)
    converted = []
    for column, column_type in zip(by_column, columns.values(), strict=True):
        if not set(map(type, column)) <= TEXT_OR_NULL:
            return None
        if column_type != "string":
            # `None` and `""` are null here, and the only falsy values of the column
            present = list(filter(None, column))
            parsed = _parse_column(present, column_type)
            if parsed is None:
                return None
            if len(present) < len(column):
                for i in _falsy_positions(column):  # ascending: each lands where it was
                    parsed.insert(i, None)
            column = parsed
        converted.append(column)
    return Columns(names, converted)


def _parse_column(texts: list[str], column_type: str) -> list | None:
    """The int values of canonical int `texts`, or the `texts` themselves when they are all
    real dates; None when one of them is neither. Canonical int text is what str() gives
    back for its int(), and a real date `YYYY-MM-DD` what isoformat() gives back for its
    date (`-0` and the year 0000 fail here and are left to the per-record path)."""
    if not texts:
        return []
    if column_type == "int":
        # Canonical int text, checked by one regular expression over the whole column
        # (`_CANONICAL_INTS`), then converted by a C-level map; the range checked after.
        lines = "\n".join(texts) + "\n"
        if lines.count("\n") != len(texts) or not _CANONICAL_INTS.fullmatch(lines):
            return None  # a value with a line break in it, or one that is not canonical
        parsed = list(map(int, texts))
        if parsed and (min(parsed) < INT64_MIN or max(parsed) > INT64_MAX):
            return None
        return parsed
    try:
        parsed = list(map(date.fromisoformat, texts))
    except ValueError:
        return None
    if list(map(date.isoformat, parsed)) != texts:
        return None
    return texts


def _positions(values: list, value: object) -> list[int]:
    """The indexes of `value` in `values`, ascending, found by C-level `list.index`."""
    found, i = [], -1
    try:
        while True:
            i = values.index(value, i + 1)
            found.append(i)
    except ValueError:
        return found


def _falsy_positions(column: list) -> list[int]:
    """The indexes of the nulls (`None` and `""`) of a text column, ascending."""
    return sorted([*_positions(column, None), *_positions(column, "")])


def _row_error(
    record: RawRecord, ordinal: int, converters: list[tuple[str, Callable[[Any], Any]]]
) -> RowError:
    """The error of a record known to fail: find its first bad column (the slow path)."""
    for name, convert in converters:
        try:
            convert(record.values.get(name))
        except ValueError as exc:
            return RowError(
                str(exc), line=record.line, record=ordinal, column=name, raw=dict(record.values)
            )
    raise AssertionError("the record converted after all")


def null_out(records: Iterable[RawRecord], null_values: Collection[str]) -> None:
    """Make every value of `records` that is one of `null_values` (an ingest's markers of a
    missing value: `NA`, `\\N`, ...) null, in place, before inference and typing."""
    if not null_values:
        return
    nulls = frozenset(null_values)
    if isinstance(records, ColumnRecords) and not records.built:
        # A column at a time, in C without a Python compare or hash per value: a column of
        # text only is joined by line ends and searched for each marker as a line of its
        # own (a hit is a candidate: a marker holding a line end may match across values);
        # one holding a null already is hashed. Each candidate's places are then found.
        wrapped = [(marker, f"\n{marker}\n") for marker in nulls]
        for column in records.columns:
            try:
                joined = "\n" + "\n".join(column) + "\n"
                markers: Iterable[str] = [m for m, line in wrapped if line in joined]
            except TypeError:  # a null (None) in it
                markers = nulls.intersection(column)
            for marker in markers:
                for i in _positions(column, marker):
                    column[i] = None
        return
    for record in records:
        values = record.values
        try:
            if nulls.isdisjoint(values.values()):  # most records: one C-level check
                continue
        except TypeError:  # an unhashable value (a JSON array or object): look one by one
            pass
        for name, value in values.items():
            if type(value) is str and value in nulls:
                values[name] = None
