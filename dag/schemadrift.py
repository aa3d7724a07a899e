"""Schema drift of a file ingest: its input's columns against those of the pipeline's last
succeeded run, and what `on_schema_change` makes of a change.

- `fail` (the default when the step declares `columns`, a contract): a column added or
  removed fails the step as an input-data error (`SchemaChanged`), naming both.
- `evolve`: the input's columns flow through as they are (a table export adds a new column
  to its target; a removed one is null there from now on).
- `ignore` (the default without declared `columns`): the same as `evolve` for the data.

Either way the change is recorded on the step (`schema_change` in `GET /runs/{id}`). The
first run of a pipeline, or one after no succeeded run, has nothing to compare with.
Columns are compared by name, in any order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dag.errors import InputDataError

__all__ = ["SchemaChanged", "change_message", "column_change", "schema_mode"]


class SchemaChanged(InputDataError):
    """A file ingest's columns changed since the last succeeded run, under `fail`."""


def schema_mode(config: Mapping[str, Any]) -> str:
    """The step's `on_schema_change`, its default made explicit (see the module)."""
    return config.get("on_schema_change") or ("fail" if config.get("columns") else "ignore")


def column_change(
    previous: Sequence[str] | None, current: Sequence[str]
) -> dict[str, list[str]] | None:
    """`{"added": [...], "removed": [...]}` (input order, then the previous order), or None
    when nothing changed or there is nothing to compare with."""
    if previous is None:
        return None
    before, now = set(previous), set(current)
    added = [c for c in current if c not in before]
    removed = [c for c in previous if c not in now]
    if not added and not removed:
        return None
    return {"added": added, "removed": removed}


def change_message(change: Mapping[str, Sequence[str]], run_id: str) -> str:
    """The error of a change under `fail`."""
    parts = []
    if change["added"]:
        parts.append(f"added {', '.join(repr(c) for c in change['added'])}")
    if change["removed"]:
        parts.append(f"removed {', '.join(repr(c) for c in change['removed'])}")
    return (
        f"the input's columns changed since run {run_id}: {'; '.join(parts)} "
        "(on_schema_change: fail; 'evolve' lets them through)"
    )
