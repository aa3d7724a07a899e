"""The implementations of the ingest sources declared in `dag.sources`, one module each (the
module of the same name, its `SOURCES`): the reader, the preview's view of it, its lineage
dataset and the run view's progress (`SourceImpl`). The engine, the preview, lineage, the
OpenAPI document, the CLI and the console look a source up here by its name. A new source is
one module here, found by the package (no list to edit)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.sources.file import FileSource
from actors.sources.source import SourceImpl
from actors.sources.table import TableSource
from dag.registry import registered_modules

__all__ = ["SOURCE_IMPLS", "FileSource", "SourceImpl", "TableSource", "source_impl"]

# Every module of this package but `source.py`, in the order of their names (as in
# `dag.sources`; a test keeps the two registries in step).
_MODULES = registered_modules(__name__, __path__, "source")

SOURCE_IMPLS: dict[str, SourceImpl] = {s.name: s for m in _MODULES for s in m.SOURCES}


def source_impl(config: Mapping[str, Any]) -> SourceImpl:
    """The implementation of a valid ingest config's source (`file` when it names none)."""
    return SOURCE_IMPLS[config.get("source", "file")]
