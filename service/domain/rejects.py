"""A step's rejected rows as people read them: the first rows of the reject file the step
published (`connectors.read_rejects`), or, until it has published one (it has not committed
yet, or the plan stops at the first bad row), the first row errors its step row keeps. The
console's run page and `GET /runs/{id}/steps/{step}/rejects` (`etl runs show --rejects`)
both read them here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import connectors
from service.domain.db import Cursor
from service.domain.runs import get_run_view
from service.errors import NotFound


def step_rejects(
    cur: Cursor, reject_dir: Path, run_id: str, step_name: str, *, limit: int
) -> dict[str, Any]:
    """Up to `limit` rejected rows (`line`, `record`, `column`, `reason`, `raw`) of one
    step of a run, with the step's `rejected` count, whether they come from the published
    reject file (`published`) and that file's path; `NotFound` for an unknown run or step."""
    view = get_run_view(cur, run_id)
    step = next((s for s in view["steps"] if s["name"] == step_name), None)
    if step is None:
        raise NotFound(f"run {run_id} has no step {step_name!r}")
    return rejects_of(reject_dir, run_id, step, limit=limit)


def rejects_of(
    reject_dir: Path, run_id: str, step: dict[str, Any], *, limit: int
) -> dict[str, Any]:
    """`step_rejects` for a step (an API step) already read."""
    preview = connectors.read_rejects(reject_dir, run_id, step["name"], limit=limit)
    rows = preview.rows if preview.exists else list(step.get("row_errors") or [])[:limit]
    return {
        "run_id": run_id,
        "step": step["name"],
        "rejected": step.get("rejected") or 0,
        "published": preview.exists,
        "path": str(preview.path),
        "items": [_row(r) for r in rows],
    }


def _row(row: dict[str, Any]) -> dict[str, Any]:
    """A reject row with the five fields, whatever the file held."""
    return {k: row.get(k) for k in ("line", "record", "column", "reason", "raw")}
