"""The transform-op registry (`dag.ops`): every op module is registered, and every op has a
config schema that its validator agrees with, an implementation and a column-lineage rule
over its own columns. An op added without one of these fails here."""

from __future__ import annotations

import importlib
import pkgutil

import jsonschema
import pytest

import dag.ops
from dag.errors import FieldError
from dag.ops import OPS, ColumnLineage, Op, build_transform
from dag.stepconfig import TRANSFORM_OPS, validate_config

COLUMNS = {"name": "string", "n": "int", "raw": "string"}
# One valid config of each op, every optional key given; a new op needs one here.
EXAMPLES = {
    "trim": {"op": "trim", "columns": ["name", "raw"]},
    "normalize_whitespace": {"op": "normalize_whitespace", "columns": ["name"]},
    "map": {"op": "map", "column": "n", "mapping": {"1": "one"}, "into": "word", "default": None},
    "filter_eq": {"op": "filter_eq", "column": "name", "value": "x"},
    "parse_date": {"op": "parse_date", "column": "raw"},
    "aggregate": {"op": "aggregate", "column": "n", "group_by": ["name"]},
}
# Modules of dag.ops that hold no op.
NOT_OPS = {"columnar", "op", "schema", "transform"}


def test_every_op_module_is_registered_in_order() -> None:
    modules = {info.name for info in pkgutil.iter_modules(dag.ops.__path__)} - NOT_OPS
    registered = []
    for name in sorted(modules):
        module = importlib.import_module(f"dag.ops.{name}")
        assert module.OPS and all(isinstance(op, Op) for op in module.OPS), name
        registered += [op.name for op in module.OPS]
    assert sorted(registered) == sorted(OPS)
    documented = ("trim", "normalize_whitespace", "map", "filter_eq", "parse_date", "aggregate")
    assert documented == TRANSFORM_OPS
    assert sorted(EXAMPLES) == sorted(OPS)


@pytest.mark.parametrize("name", list(OPS))
def test_an_op_has_a_schema_its_validator_agrees_with(name: str) -> None:
    op, config = OPS[name], EXAMPLES[name]
    assert op.properties and set(op.required) <= set(op.properties)
    assert all(isinstance(schema, dict) and schema for schema in op.properties.values())
    schema = {
        "type": "object",
        "properties": {"op": {"enum": [name]}, **op.properties},
        "required": ["op", *op.required],
        "additionalProperties": False,
    }
    jsonschema.validate(config, schema)
    errors: list[FieldError] = []
    validate_config("transform", config, "config", errors)
    assert errors == []
    # A key outside the schema is refused by both.
    validate_config("transform", {**config, "extra": 1}, "config", errors)
    assert [e.field for e in errors] == ["config.extra"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**config, "extra": 1}, schema)
    # So is a config without a required key.
    for key in op.required:
        errors = []
        validate_config("transform", {k: v for k, v in config.items() if k != key}, "c", errors)
        assert f"c.{key}" in [e.field for e in errors]


@pytest.mark.parametrize("name", list(OPS))
def test_an_op_has_a_column_lineage_over_its_own_columns(name: str) -> None:
    config = EXAMPLES[name]
    lineage = OPS[name].lineage(config)
    assert isinstance(lineage, ColumnLineage)
    assert lineage.fields or lineage.dataset
    output = build_transform(config, COLUMNS).output_columns
    assert set(lineage.fields) <= set(output)
    derivations = [d for ds in lineage.fields.values() for d in ds] + lineage.dataset
    assert {d.column for d in derivations} <= set(COLUMNS)
    assert all(d.kind in ("DIRECT", "INDIRECT") for d in derivations)
