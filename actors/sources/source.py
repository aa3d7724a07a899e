"""What an ingest source's implementation is (`actors.sources.SourceImpl`): the engine's side
of a source declared in `dag.sources`, one module each in `actors.sources`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.datasets import Places
from actors.stepio import StepEnv
from dag import Step

Config = Mapping[str, Any]


def _no_dialect(step: Step, env: StepEnv) -> dict[str, Any] | None:
    return None


def _no_progress(config: Config, checkpoint: Mapping[str, Any], data_dir: Path) -> float | None:
    return None


@dataclass(frozen=True)
class SourceImpl:
    """One ingest source's implementation. `reader(step, env, columns, limit)`: what reads
    its input batches from a checkpoint (a run's, or a preview's first `limit` records);
    `view(config)`: where a preview says it read (`view_schema`: that view's properties in
    the OpenAPI document; `where(view)`: the CLI's words for it); `dataset(places,
    config)`: its lineage input dataset; `dialect(step, env)`: what its input looks
    written in when not as declared (a preview's proposal); `progress(config, checkpoint,
    data_dir)`: the run view's done fraction of a running step, when known; `infers`:
    whether its reader has the evidence of inferred column types (`evidence`)."""

    name: str
    reader: Callable[..., Any]
    view: Callable[[Config], dict[str, Any]]
    view_schema: dict[str, Any]
    where: Callable[[Mapping[str, Any]], str]
    dataset: Callable[[Places, Config], tuple[str, str]]
    dialect: Callable[[Step, StepEnv], dict[str, Any] | None] = _no_dialect
    progress: Callable[[Config, Mapping[str, Any], Path], float | None] = _no_progress
    infers: bool = False
