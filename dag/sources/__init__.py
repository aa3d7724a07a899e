"""The registry of ingest sources: one module each (`dag.sources.<module>`, its `SOURCES`),
holding the declaration of a value of an ingest's `config["source"]` (`IngestSource`): its
config keys, checks, schema and defaults, the key naming its file path, its cursor. The
validator (`dag.stepconfig`), the OpenAPI components of the ingest configs, the templated
fields and the cursor marks read it; the implementation of each source is the module of
the same name in `actors.sources`. A new source is one module here and one there, each
found by its package (no list to edit)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dag.registry import registered_modules
from dag.sources.source import IngestSource

__all__ = ["SOURCES", "IngestSource", "source_of"]

# Every module of this package but `source.py`, in the order of their names (the
# documented order: the validator's message, the OpenAPI `oneOf`).
_MODULES = registered_modules(__name__, __path__, "source")

SOURCES: dict[str, IngestSource] = {s.name: s for module in _MODULES for s in module.SOURCES}


def source_of(config: Mapping[str, Any]) -> IngestSource:
    """The source of a valid ingest config (`file` when it names none)."""
    return SOURCES[config.get("source", "file")]
