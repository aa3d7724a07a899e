"""`filter_eq`: keeps records whose value equals the literal converted to the column type
(`"1"` matches 1 in an int column; a JSON literal becomes its JSON text for a string column);
the literal null keeps the null values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import eq
from typing import Any

from dag.columns import unbuilt
from dag.errors import ConfigValueError, FieldError
from dag.fieldchecks import check_literal, require_str
from dag.ops.columnar import kept, kept_at, positions
from dag.ops.op import ColumnLineage, Derivation, Op
from dag.ops.schema import LITERAL, NAME
from dag.ops.transform import Record, Transform, config_str, need_columns
from dag.records import RowError
from dag.types import convert_value


class _FilterEq(Transform):
    def __init__(self, config: Mapping[str, Any], input_columns: Mapping[str, str]):
        self._column = config_str(config, "column", "filter_eq")
        need_columns([self._column], input_columns, "filter_eq")
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
    ) -> tuple[Sequence[Record], list[RowError]]:
        column, value = self._column, self._value
        batch = unbuilt(records)
        if batch is not None:  # C-level comparisons, no record built
            values = batch.column(column)
            count = values.count(value)  # `==` (typed values are equal to themselves)
            if count * 3 <= len(values):  # a few: found by C-level scans
                return kept_at(batch, positions(values, value, count)), []
            return kept(batch, list(map(eq, values, repeat(value)))), []
        return [r for r in records if r[column] == value], []


def _validate(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    require_str(config, "column", path, errors)
    if "value" not in config:
        errors.append(FieldError(f"{path}.value", "is required (null is allowed)"))
    else:
        check_literal(config["value"], f"{path}.value", errors)


def _lineage(config: Mapping[str, Any]) -> ColumnLineage:
    return ColumnLineage(dataset=[Derivation(config["column"], "INDIRECT", "FILTER", "filter_eq")])


FILTER_EQ = Op(
    "filter_eq",
    {"column": NAME, "value": LITERAL},
    ("column", "value"),
    _validate,
    _FilterEq,
    _lineage,
)
OPS = (FILTER_EQ,)
