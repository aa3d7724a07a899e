"""The implementations of the export targets declared in `dag.targets`, one module each (the
module of the same name, its `TARGETS`): the sink, the preview's view, the lineage dataset,
the purge and the run view (`TargetImpl`). The engine, the preview, lineage, the purge, the
OpenAPI document, the CLI and the console look a target up here by its name. A new target is
one module here, found by the package (no list to edit)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.targets.file import FileExportView, FileSink
from actors.targets.table import TableExportView, TableSink
from actors.targets.target import ExportView, Removed, TargetImpl, ViewText
from dag.registry import registered_modules

__all__ = [
    "TARGET_IMPLS",
    "ExportView",
    "FileExportView",
    "FileSink",
    "Removed",
    "TableExportView",
    "TableSink",
    "TargetImpl",
    "ViewText",
    "target_impl",
]

# Every module of this package but `target.py`, in the order of their names (as in
# `dag.targets`; a test keeps the two registries in step).
_MODULES = registered_modules(__name__, __path__, "target")

TARGET_IMPLS: dict[str, TargetImpl] = {t.name: t for m in _MODULES for t in m.TARGETS}


def target_impl(config: Mapping[str, Any]) -> TargetImpl:
    """The implementation of a valid export config's target (`file` when it names none)."""
    return TARGET_IMPLS[config.get("target", "file")]
