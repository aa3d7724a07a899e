"""Column inference over a whole input: the types of the columns a plan does not declare,
decided from every value of the step's input before its first batch commits (never from
a first batch), so that no record is ever rejected because of an inferred type.

The rule (`docs/plan-format.md`): `int` if every non-null value converts to int64, else
`date` if every one is an ISO date, else `string`; a column without a value is `string`.
Null is what the reader makes null (an empty CSV field) and what the ingest's `null_values`
name (`NA`, `\\N`, ...). `ColumnInference` takes the input batch by batch and keeps, for
each column still in doubt, the first value that ruled a type out: that is the evidence a
preview shows. A column is checked a batch at a time by one regular expression over its
values, value by value only where that one fails, so the scan costs about what reading
the input costs (`bench/README.md`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dag.dialect import missing_columns_message
from dag.errors import ConfigValueError
from dag.records import ColumnRecords, RawRecord
from dag.types import COLUMN_TYPES, convert_value, show_value

# Canonical int64 text (the bound checked apart for 19 digits) and ISO date shapes, one per
# line of a batch's values joined by newlines.
_INTS = re.compile(r"(?:-?(?:0|[1-9][0-9]{0,17})\n)*")
_DATES = re.compile(r"(?:[0-9]{4}-[0-9]{2}-[0-9]{2}\n)*")


@dataclass
class _Doubt:
    """What a column's values so far allow, and the first value that ruled each type out."""

    values: int = 0
    int_ok: bool = True
    date_ok: bool = True
    not_int: tuple[int, object] | None = None
    not_date: tuple[int, object] | None = None


class ColumnInference:
    """The types of `header`'s undeclared columns from every record `observe` is given."""

    def __init__(
        self,
        header: Sequence[str],
        declared: Mapping[str, str] | None = None,
        delimiter: str | None = None,
    ):
        self.declared = check_declared(header, declared, delimiter)
        self.header = list(header)
        self._doubts = {n: _Doubt() for n in header if n not in self.declared}

    def observe(self, records: Sequence[RawRecord]) -> None:
        """Take one batch of records into account. A batch read a column at a time
        (`ColumnRecords`, text and null only) is checked a column at a time in C: its
        present values are those `filter` keeps (None and "" are its only falsy values)."""
        by_column = isinstance(records, ColumnRecords) and not records.built
        for name, doubt in self._doubts.items():
            if not (doubt.int_ok or doubt.date_ok):
                continue  # a string already: no value can change that
            joined = None
            if by_column:
                present, joined = _present_texts(records.column(name))
                every_text = True
            else:
                present = [v for r in records if (v := r.values.get(name)) is not None and v != ""]
                every_text = set(map(type, present)) == {str}  # C-level: no call per value
            if present:
                doubt.values += len(present)
                _check(doubt, present if every_text else None, records, name, joined)

    def open_doubts(self) -> dict[str, tuple[bool, bool]]:
        """Each undeclared column that is not a string yet: (may be an int, may be a date)."""
        return {n: (d.int_ok, d.date_ok) for n, d in self._doubts.items() if d.int_ok or d.date_ok}

    def take_counts(self, counts: dict[str, int]) -> None:
        """Count present values of columns in doubt that rule no type out (`counts`: column
        -> how many; `dag.blockinference` checked them)."""
        for name, count in counts.items():
            self._doubts[name].values += count

    @property
    def settled(self) -> bool:
        """True when every undeclared column is a string already: no later value can change
        a type or the evidence (`observe` skips such columns), so the rest of the input
        need not be read for them."""
        return not any(d.int_ok or d.date_ok for d in self._doubts.values())

    def columns(self) -> dict[str, str]:
        """Column name -> type, in header order; declared types as declared."""
        return {n: self.declared.get(n) or _decided(self._doubts[n]) for n in self.header}

    def evidence(self) -> dict[str, str]:
        """For every undeclared column, why it has its type (in header order)."""
        return {n: _evidence(d) for n, d in self._doubts.items()}


def infer_columns(
    header: Sequence[str],
    records: Iterable[RawRecord],
    declared: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Column name -> type in header order from every one of `records`; declared types
    win. Raises `ConfigValueError` for a declared column that is not in the header or a
    declared type that is not one of `COLUMN_TYPES`."""
    inference = ColumnInference(header, declared)
    inference.observe(list(records))
    return inference.columns()


def check_declared(
    header: Sequence[str], declared: Mapping[str, str] | None, delimiter: str | None = None
) -> dict[str, str]:
    """The declared types, each checked against the header and `COLUMN_TYPES`. Declared
    columns missing from the header fail with the header as read (and, for a CSV file read
    with `delimiter`, another delimiter that would find them)."""
    declared = dict(declared or {})
    missing = [name for name in declared if name not in header]
    if missing:
        message = missing_columns_message(header, missing, delimiter)
        raise ConfigValueError(message, column=missing[0])
    for name, column_type in declared.items():
        if column_type not in COLUMN_TYPES:
            raise ConfigValueError(
                f"unknown type {column_type!r} (expected one of {', '.join(COLUMN_TYPES)})",
                column=name,
            )
    return declared


def _present_texts(values: list) -> tuple[list[str], str | None]:
    """The present values of a column of text and null (None, ""), and when it is cheaply
    had, their text joined by line ends (one ending each). A column without a null is
    joined as it is (C-level, no Python work per value): an empty value shows as an empty
    line there, and only then (or with a None) are its values filtered."""
    try:
        joined = "\n".join(values)
    except TypeError:  # a None
        return list(filter(None, values)), None
    if not joined or joined[0] == "\n" or joined[-1] == "\n" or "\n\n" in joined:
        return list(filter(None, values)), None  # "" among them (or a line end in one)
    return values, joined + "\n"


def _check(
    doubt: _Doubt,
    texts: list[str] | None,
    records: Sequence[RawRecord],
    name: str,
    joined: str | None = None,
) -> None:
    """Rule types out of `doubt` by the present values of column `name` (of `records`):
    `texts` (`joined`: their lines, when already had), or None when one of them is not
    text. A value with a line end in it is not checked by the joined text (it would read
    as two lines there) but value by value."""
    if joined is None:
        joined = "\n".join(texts) + "\n" if texts is not None else ""
    one_a_line = texts is not None and joined.count("\n") == len(texts)
    if doubt.int_ok and not (one_a_line and _INTS.fullmatch(joined)):
        doubt.not_int = _first_failing(records, name, "int")
        doubt.int_ok = doubt.not_int is None
    if doubt.date_ok and (
        not one_a_line or not _DATES.fullmatch(joined) or _any_bad_date(set(texts or ()))
    ):
        doubt.not_date = _first_failing(records, name, "date")
        doubt.date_ok = doubt.not_date is None


def _any_bad_date(texts: list[object]) -> bool:
    """Shaped like dates, but is each one a calendar date?"""
    try:
        for text in texts:
            convert_value(text, "date")
    except ValueError:
        return True
    return False


def _first_failing(records: Sequence[RawRecord], name: str, column_type: str) -> tuple | None:
    """(line, value) of the first present value of column `name` that is not of the type."""
    if isinstance(records, ColumnRecords) and not records.built:
        lined = zip(records.lines(), records.column(name), strict=True)
    else:
        lined = ((record.line, record.values.get(name)) for record in records)
    for line, value in lined:
        if value is None or value == "":
            continue
        try:
            convert_value(value, column_type)
        except ValueError:
            return line, value
    return None


def _decided(doubt: _Doubt) -> str:
    if doubt.values and doubt.int_ok:
        return "int"
    if doubt.values and doubt.date_ok:
        return "date"
    return "string"


def _evidence(doubt: _Doubt) -> str:
    kind = _decided(doubt)
    if not doubt.values:
        return "string: no value (every one is null)"
    if kind == "int":
        return f"int: all {doubt.values:,} value(s) are int64"
    if kind == "date":
        line, value = doubt.not_int or (0, None)
        return (
            f"date: all {doubt.values:,} value(s) are ISO dates"
            f" (line {line}: {show_value(value)} is not an int64)"
        )
    assert doubt.not_int is not None and doubt.not_date is not None
    (i_line, i_value), (d_line, d_value) = doubt.not_int, doubt.not_date
    if (i_line, i_value) == (d_line, d_value):
        return f"string: {show_value(i_value)} at line {i_line} is neither an int64 nor a date"
    return (
        f"string: {show_value(i_value)} at line {i_line} is not an int64,"
        f" {show_value(d_value)} at line {d_line} is not an ISO date"
    )
