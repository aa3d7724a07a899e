"""The registry of export targets: one module each (`dag.targets.<module>`, its `TARGETS`),
holding the declaration of a value of an export's `config["target"]` (`ExportTarget`): its
config keys, checks, schema and defaults, whether it writes a file path, whether its rows
stage in the batch's commit, its preview warnings. The validator (`dag.stepconfig`), the
OpenAPI components of the export configs, the plan's distinct-path rule, the templated
fields and the fused group's memory read it; the implementation of each target is the
module of the same name in `actors.targets`. A new target is one module here and one there,
each found by its package (no list to edit)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dag.registry import registered_modules
from dag.targets.target import ExportTarget

__all__ = ["TARGETS", "ExportTarget", "target_of"]

# Every module of this package but `target.py`, in the order of their names (the
# documented order: the validator's message, the OpenAPI `oneOf`).
_MODULES = registered_modules(__name__, __path__, "target")

TARGETS: dict[str, ExportTarget] = {t.name: t for module in _MODULES for t in module.TARGETS}


def target_of(config: Mapping[str, Any]) -> ExportTarget:
    """The target of a valid export config (`file` when it names none, as a stored plan of
    an export always names one)."""
    return TARGETS[config.get("target", "file")]
