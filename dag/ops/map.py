"""`map`: looks `str(value)` up in `mapping` (keys are strings; an int 7 matches "7"). An
unmapped value, null included, becomes `default` if one is given, else passes unchanged. The
output goes to `into` (appended as a new column, or replacing that column's values and type)
or back into `column`. Its type is `int` if every mapping value and the default are ints (or
null) and, when unmapped values pass through, the source column is `int`; else `string`,
with ints written as decimal text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any

from dag.columns import unbuilt
from dag.errors import ConfigValueError, FieldError
from dag.fieldchecks import check_literal, require_str
from dag.ops.columnar import keep_nulls, with_column
from dag.ops.op import ColumnLineage, Derivation, Op
from dag.ops.schema import LITERAL, NAME, NO_NUL
from dag.ops.transform import Record, Transform, config_str, need_columns
from dag.records import RowError
from dag.types import convert_value


class _Map(Transform):
    def __init__(self, config: Mapping[str, Any], input_columns: Mapping[str, str]):
        self._column = config_str(config, "column", "map")
        need_columns([self._column], input_columns, "map")
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
        # The mapping by value for the column path: an int 7 is looked up as "7", so the
        # int keys are the canonical decimal texts among the keys (str(int(k)) == k).
        self._by_value = (
            {int(k): v for k, v in self._mapping.items() if _int_text(k)}
            if self._key_of_int
            else self._mapping
        )
        self.output_columns = dict(input_columns)
        self.output_columns[self._into] = self._type

    def apply(
        self, records: Sequence[Record], first_ordinal: int = 1
    ) -> tuple[Sequence[Record], list[RowError]]:
        batch = unbuilt(records)
        if batch is not None:
            return with_column(batch, self._into, self._mapped(batch.column(self._column))), []
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

    def _mapped(self, values: list[Any]) -> list[Any]:
        """The record path's results for a column's `values`, by C-level `map`s: a
        mapped value, else the default, else the value passing through (an int as its
        decimal text into a string column; null stays null)."""
        by_value = self._by_value
        if self._has_default:
            return list(map(by_value.get, values, repeat(self._default)))
        if self._type == "string" and self._key_of_int:
            return list(map(by_value.get, values, keep_nulls(values, map(str, values))))
        return list(map(by_value.get, values, values))


def _int_text(key: str) -> bool:
    """Whether `key` is what str() gives for an int (so an int value looks it up)."""
    try:
        return str(int(key)) == key
    except ValueError:
        return False


def _validate(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    require_str(config, "column", path, errors)
    if "mapping" not in config:
        errors.append(FieldError(f"{path}.mapping", "is required"))
    elif not isinstance(config["mapping"], Mapping):
        errors.append(FieldError(f"{path}.mapping", "must be an object of value -> new value"))
    else:
        for source, target in config["mapping"].items():
            check_literal(target, f"{path}.mapping.{source}", errors)
    if "into" in config:
        require_str(config, "into", path, errors)
    if "default" in config:
        check_literal(config["default"], f"{path}.default", errors)


def _lineage(config: Mapping[str, Any]) -> ColumnLineage:
    into = config.get("into") or config["column"]
    return ColumnLineage(
        fields={into: [Derivation(config["column"], "DIRECT", "TRANSFORMATION", "map")]}
    )


_MAPPING = {"type": "object", "propertyNames": {"pattern": NO_NUL}, "additionalProperties": LITERAL}
MAP = Op(
    "map",
    {"column": NAME, "mapping": _MAPPING, "into": NAME, "default": LITERAL},
    ("column", "mapping"),
    _validate,
    _Map,
    _lineage,
)
OPS = (MAP,)
