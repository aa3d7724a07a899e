"""`parse_date`: a string (or date) column becomes `date`; a value that is not an ISO
`YYYY-MM-DD` calendar date is a row error and its record is dropped; `""` is null."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from itertools import compress
from operator import not_
from typing import Any

from dag.columns import Columns, record_at, unbuilt
from dag.errors import ConfigValueError, FieldError
from dag.fieldchecks import require_str
from dag.ops.columnar import kept, with_column
from dag.ops.op import ColumnLineage, Derivation, Op
from dag.ops.schema import NAME
from dag.ops.transform import Record, Transform, config_str, need_columns
from dag.records import RowError
from dag.types import convert_value


class _ParseDate(Transform):
    def __init__(self, config: Mapping[str, Any], input_columns: Mapping[str, str]):
        self._column = config_str(config, "column", "parse_date")
        need_columns([self._column], input_columns, "parse_date")
        if input_columns[self._column] == "int":
            raise ConfigValueError(
                "parse_date: needs a string column, not int", column=self._column
            )
        self.output_columns = dict(input_columns)
        self.output_columns[self._column] = "date"

    def apply(
        self, records: Sequence[Record], first_ordinal: int = 1
    ) -> tuple[Sequence[Record], list[RowError]]:
        batch = unbuilt(records)
        if batch is not None:
            return self._apply_columns(batch, first_ordinal)
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

    def _apply_columns(self, batch: Columns, first_ordinal: int) -> tuple[Columns, list[RowError]]:
        """The record path's output and row errors, a column at a time: each distinct value
        is checked once (a column of dates repeats them), `""` becomes null by a C-level
        `map`, and the records of bad values are dropped by one mask."""
        column = self._column
        values = batch.column(column)
        try:
            distinct = set(values)
        except TypeError:  # an unhashable value (not a typed one): record by record
            return self.apply(batch.records(), first_ordinal)
        distinct.discard(None)
        if "" in distinct:
            distinct.discard("")
            dates = list(map(_EMPTY_AS_NULL.get, values, values))
        else:
            dates = values
        bad = _bad_dates(distinct)
        if not bad:
            return with_column(batch, column, dates), []
        flags = list(map(bad.__contains__, values))
        errors = [
            RowError(
                bad[values[i]], record=first_ordinal + i, column=column, raw=record_at(batch, i)
            )
            for i in compress(range(len(flags)), flags)
        ]
        return kept(with_column(batch, column, dates), list(map(not_, flags))), errors


def _bad_dates(texts: set[Any]) -> dict[Any, str]:
    """The reason each value of `texts` that is not a date is refused, by value; a set of
    real `YYYY-MM-DD` dates (what isoformat() gives back for its date) in one go."""
    values = list(texts)
    try:
        if list(map(date.isoformat, map(date.fromisoformat, values))) == values:
            return {}
    except (TypeError, ValueError):
        pass
    bad = {}
    for value in values:
        try:
            convert_value(value, "date")
        except ValueError as exc:
            bad[value] = str(exc)
    return bad


_EMPTY_AS_NULL: dict[str, None] = {"": None}


def _validate(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    require_str(config, "column", path, errors)


def _lineage(config: Mapping[str, Any]) -> ColumnLineage:
    column = config["column"]
    return ColumnLineage(
        fields={column: [Derivation(column, "DIRECT", "TRANSFORMATION", "parse_date")]}
    )


PARSE_DATE = Op("parse_date", {"column": NAME}, ("column",), _validate, _ParseDate, _lineage)
OPS = (PARSE_DATE,)
