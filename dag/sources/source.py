"""What an ingest source is (`dag.sources.IngestSource`): the declaration that `dag` keeps of
each value of an ingest's `config["source"]`. Its implementation (the reader, the preview's
view of it, the lineage dataset, the run view's progress) is in `actors.sources`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dag.errors import FieldError

Config = Mapping[str, Any]


def _no_defaults(config: dict[str, Any]) -> None:
    """A source whose config has no documented default."""


def _no_cursor(config: Config) -> tuple[str, str] | None:
    return None


@dataclass(frozen=True)
class IngestSource:
    """One ingest source. `keys`: the config keys it allows, `source` first;
    `validate(config, path, errors)`: every problem of a config whose keys are allowed;
    `schema`: the JSON Schema of its config (the OpenAPI component `<Name>IngestConfig`);
    `defaults(config)`: its documented defaults set in a copy of a valid config;
    `path_key`: the key naming a relative path (or glob) under the data directory
    (templated by run parameters); `cursor(config)`: the (table, column) whose mark an
    incremental ingest keeps across runs, or None."""

    name: str
    keys: tuple[str, ...]
    validate: Callable[[Config, str, list[FieldError]], None]
    schema: dict[str, Any]
    defaults: Callable[[dict[str, Any]], None] = _no_defaults
    path_key: str | None = None
    cursor: Callable[[Config], tuple[str, str] | None] = _no_cursor
