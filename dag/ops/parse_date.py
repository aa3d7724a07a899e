"""`parse_date`: a string (or date) column becomes `date`; a value that is not an ISO
`YYYY-MM-DD` calendar date is a row error and its record is dropped; `""` is null."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dag.errors import ConfigValueError, FieldError
from dag.fieldchecks import require_str
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


def _validate(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    require_str(config, "column", path, errors)


def _lineage(config: Mapping[str, Any]) -> ColumnLineage:
    column = config["column"]
    return ColumnLineage(
        fields={column: [Derivation(column, "DIRECT", "TRANSFORMATION", "parse_date")]}
    )


PARSE_DATE = Op("parse_date", {"column": NAME}, ("column",), _validate, _ParseDate, _lineage)
OPS = (PARSE_DATE,)
