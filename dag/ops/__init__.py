"""The registry of transform ops: one module each (`dag.ops.<module>`, its `OPS`), holding the
op's config schema, checks, implementation and column-lineage rule (`dag.ops.op.Op`). The
validator (`dag.stepconfig`), the OpenAPI components of the op configs and the OpenLineage
column lineage all read it; a new op is one new module, listed in `_MODULES`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dag.errors import ConfigValueError
from dag.ops import aggregate, filter_eq, parse_date, whitespace
from dag.ops import map as map_op
from dag.ops.op import ColumnLineage, Derivation, Op
from dag.ops.transform import Transform

__all__ = ["OPS", "ColumnLineage", "Derivation", "Op", "Transform", "build_transform"]

# In the order of the documented op list (the validator's message, the OpenAPI `oneOf`).
_MODULES = (whitespace, map_op, filter_eq, parse_date, aggregate)

OPS: dict[str, Op] = {op.name: op for module in _MODULES for op in module.OPS}


def build_transform(config: Mapping[str, Any], input_columns: Mapping[str, str]) -> Transform:
    """A `Transform` for `config` (`{"op": ...}`) over records with `input_columns`."""
    op = config.get("op")
    if not isinstance(op, str) or op not in OPS:
        raise ConfigValueError(f"unknown transform op {op!r}")
    return OPS[op].build(config, input_columns)
