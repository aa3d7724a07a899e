"""What an export target is (`dag.targets.ExportTarget`): the declaration that `dag` keeps of
each value of an export's `config["target"]`. Its implementation (the sink, the preview view,
the lineage dataset, the purge, the run view) is in `actors.targets`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dag.errors import FieldError
from dag.preview_warning import PreviewWarning

Config = Mapping[str, Any]


def _no_defaults(config: dict[str, Any]) -> None:
    """A target whose config has no documented default."""


def _no_warnings(config: Config, inputs: Sequence[Mapping[str, Any]]) -> list[PreviewWarning]:
    return []


@dataclass(frozen=True)
class ExportTarget:
    """One export target. `keys`: the config keys it allows, `target` first;
    `validate(config, path, errors)`: every problem of a config whose keys are allowed;
    `schema`: the JSON Schema of its config (the OpenAPI component `<Name>ExportConfig`),
    with the `components` it refers to; `defaults(config)`: its documented defaults set in
    a copy of a valid config; `path_key`: the key naming a relative file path under the
    export directory (templated by run parameters, distinct among a plan's exports);
    `stages_rows`: whether its batch's rows are staged in the batch's commit (a fused
    group stores them until then); `preview_warnings(config, inputs)`: what a preview
    warns about the records it would write."""

    name: str
    keys: tuple[str, ...]
    validate: Callable[[Config, str, list[FieldError]], None]
    schema: dict[str, Any]
    components: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    defaults: Callable[[dict[str, Any]], None] = _no_defaults
    path_key: str | None = None
    stages_rows: bool = False
    preview_warnings: Callable[[Config, Sequence[Mapping[str, Any]]], list[PreviewWarning]] = (
        _no_warnings
    )
