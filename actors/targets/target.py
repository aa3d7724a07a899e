"""What an export target's implementation is (`actors.targets.TargetImpl`): the engine's side
of a target declared in `dag.targets`, one module each in `actors.targets`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from actors.datasets import Places
from actors.stepio import Sink, StepEnv
from dag import RowError, Step

Config = Mapping[str, Any]


class ExportView(Protocol):
    """What a previewed export would write, shown and never written: fed the step's output
    batch by batch (`write`: the records it would refuse), then its final records."""

    def write(self, records: list[dict], first_ordinal: int) -> list[RowError]: ...

    def finish(self, final: list[dict]) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ViewText:
    """How the CLI prints a previewed export: a headline of (text, bold) parts, then the text
    the export would begin with, or (when `text` is None) its first rows."""

    headline: tuple[tuple[str, bool], ...]
    text: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)


class Removed(NamedTuple):
    """What removing a step's stage took away: chunk folders and staging tables."""

    stages: int = 0
    staging_tables: int = 0


def _nothing_to_withdraw(sandbox: Callable, run_id: str, step: str, config: Config) -> int:
    return 0


def _nothing_to_settle(sandbox: Callable, run_id: str, step: str, config: Config) -> None:
    """A target whose succeeded step keeps nothing to settle."""


@dataclass(frozen=True)
class TargetImpl:
    """One export target's implementation. `sink(step, env, columns)`: its `Sink`;
    `preview(step, env, columns)`: its `ExportView` (`view_schema`: the view's properties
    in the OpenAPI document; `view_text(view)`: the CLI's words for it);
    `dataset(places, run_id, step, config)`: its lineage output dataset; the purge:
    `remove_stage(run_id, step, config, export_dir, sandbox)` takes away what a step that
    never published staged, `withdraw(sandbox, run_id, step, config)` the rows it
    published before its attempt ended without its final commit (their number), and
    `settle(sandbox, run_id, step, config)` what a succeeded step keeps until its run is
    cleared; `run_view(export_dir, run_id, step, sandbox)`: what the console's run page
    shows of a step's output (`sandbox`: opens a sandbox connection, None without one):
    `where` it is (None: unknown) and its `state` in words, or the `rows` it holds."""

    name: str
    sink: Callable[[Step, StepEnv, dict[str, str]], Sink]
    preview: Callable[[Step, StepEnv, dict[str, str]], ExportView]
    view_schema: dict[str, Any]
    view_text: Callable[[Mapping[str, Any]], ViewText]
    dataset: Callable[[Places, str, str, Config], tuple[str, str]]
    remove_stage: Callable[[str, str, Config, Path, Callable], Removed]
    run_view: Callable[[Path, str, Mapping[str, Any], Callable | None], dict[str, Any]]
    withdraw: Callable[[Callable, str, str, Config], int] = _nothing_to_withdraw
    settle: Callable[[Callable, str, str, Config], None] = _nothing_to_settle
