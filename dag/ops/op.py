"""What one transform op is, in one place: its config schema (the JSON Schema of each config
key, from which the validator's allowed keys and the OpenAPI component derive), its config
checks, its implementation and its column-lineage rule. `dag.ops` registers every op."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dag.errors import FieldError
from dag.ops.transform import Transform


@dataclass(frozen=True)
class Derivation:
    """An output column's (or the whole dataset's) dependency on one input column, in
    OpenLineage's terms: `kind` DIRECT or INDIRECT, a `subtype` (IDENTITY, TRANSFORMATION,
    AGGREGATION, FILTER, GROUP_BY) and an optional description."""

    column: str
    kind: str
    subtype: str
    description: str | None = None


@dataclass(frozen=True)
class ColumnLineage:
    """Where an op's output columns come from: `fields` by output column, `dataset` for the
    whole output (filters, groupings); with `identity_rest`, every other output column
    passes through unchanged."""

    fields: dict[str, list[Derivation]] = field(default_factory=dict)
    dataset: list[Derivation] = field(default_factory=list)
    identity_rest: bool = True


@dataclass(frozen=True)
class Op:
    """One transform op. `properties`: the JSON Schema of each config key but `op`, in the
    order of the allowed keys; `required`: those that must be there; `validate(config,
    path, errors)`: every problem of a config whose keys are known to be allowed;
    `build(config, input_columns)`: its `Transform`; `lineage(config)`: its column
    lineage."""

    name: str
    properties: Mapping[str, dict[str, Any]]
    required: tuple[str, ...]
    validate: Callable[[Mapping[str, Any], str, list[FieldError]], None]
    build: Callable[[Mapping[str, Any], Mapping[str, str]], Transform]
    lineage: Callable[[Mapping[str, Any]], ColumnLineage]

    @property
    def keys(self) -> tuple[str, ...]:
        """The config keys it allows, `op` first."""
        return ("op", *self.properties)
