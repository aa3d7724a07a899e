"""The cursor marks of incremental table ingest (`"cursor": COLUMN`), for admins: list a
pipeline's marks, set one by hand, reset one or all (the next run reads from the start).

A mark is the highest cursor value a succeeded run read (the engine advances it in the
transaction that ends the run, `actors.cursors`). A set or reset takes effect for runs that
start after it; a run that started from another mark does not advance it when it succeeds.
Every function works on the caller's cursor and writes its audit row there."""

from __future__ import annotations

from typing import Any

from dag.sources import source_of
from service.domain.audit import audit_change
from service.domain.db import Cursor, fetch_all, fetch_one
from service.domain.pipelines import get_pipeline
from service.errors import NotFound


def _cursor_steps(plan: Any) -> dict[str, dict[str, str]]:
    """The cursor ingests of a stored plan: step name -> {"table", "column"}, in plan order."""
    found: dict[str, dict[str, str]] = {}
    for step in (plan or {}).get("steps", []):
        config = step.get("config") or {}
        cursor = source_of(config).cursor(config) if step.get("type") == "ingest" else None
        if cursor is not None:
            found[step["name"]] = {"table": cursor[0], "column": cursor[1]}
    return found


def _view(step: str, table: str, column: str, mark: dict | None) -> dict:
    view = {"step": step, "table": table, "column": column, "value": None, "run_id": None}
    view.update(updated_by=None, updated_at=None)
    if mark is not None:
        view.update(
            value=mark["value"],
            run_id=None if mark["run_id"] is None else str(mark["run_id"]),
            updated_by=mark["updated_by"],
            updated_at=mark["updated_at"],
        )
    return view


def list_cursors(cur: Cursor, pipeline_id: str) -> list[dict]:
    """The cursor ingests of the pipeline's current plan with their marks (a mark of the
    same step on another table or column is shown as it is: the next run ignores it), then
    the marks of steps the plan no longer has. `NotFound` for an unknown pipeline."""
    steps = _cursor_steps(get_pipeline(cur, pipeline_id)["plan"])
    rows = fetch_all(cur, "list_cursor_marks", {"pipeline_id": pipeline_id})
    marks = {row["step_name"]: row for row in rows}
    views = [
        _view(name, s["table"], s["column"], marks.pop(name, None)) for name, s in steps.items()
    ]
    for name in sorted(marks):
        mark = marks[name]
        views.append(_view(name, mark["table_name"], mark["column_name"], mark))
    return views


def set_cursor(
    cur: Cursor, pipeline_id: str, step: str, value: Any, principal: str, *, request_id: str
) -> dict:
    """Set a step's mark to `value` (text form; checked against the column's type when the
    next run starts): that run reads the rows whose cursor is above it. Audited
    (`cursor.set`). `NotFound` unless `step` is a cursor ingest of the current plan."""
    steps = _cursor_steps(get_pipeline(cur, pipeline_id)["plan"])
    if step not in steps:
        raise NotFound(f"step {step!r} of pipeline {pipeline_id} is no cursor ingest")
    params = {"pipeline_id": pipeline_id, "step": step}
    before = fetch_one(cur, "lock_cursor_mark", params)
    given = {**params, **steps[step], "value": str(value), "principal": principal}
    mark = fetch_one(cur, "set_cursor_mark", given)
    assert mark is not None
    audit_change(
        cur, principal, "cursor.set", f"pipeline:{pipeline_id}", request_id,
        step=step, value=mark["value"], previous=None if before is None else before["value"],
    )  # fmt: skip
    return _view(step, mark["table_name"], mark["column_name"], mark)


def reset_cursors(
    cur: Cursor, pipeline_id: str, step: str | None, principal: str, *, request_id: str
) -> None:
    """Drop the mark of `step` (every mark of the pipeline when None): the next run reads
    from the start. Audited (`cursor.reset`, one row per mark dropped). `NotFound` for an
    unknown pipeline, or a `step` that is neither a cursor ingest nor has a mark."""
    steps = _cursor_steps(get_pipeline(cur, pipeline_id)["plan"])
    rows = fetch_all(cur, "list_cursor_marks", {"pipeline_id": pipeline_id})
    marked = [row["step_name"] for row in rows]
    if step is not None and step not in steps and step not in marked:
        raise NotFound(f"step {step!r} of pipeline {pipeline_id} has no cursor")
    for name in sorted(marked) if step is None else [step]:
        row = fetch_one(cur, "delete_cursor_mark", {"pipeline_id": pipeline_id, "step": name})
        if row is not None:
            audit_change(
                cur, principal, "cursor.reset", f"pipeline:{pipeline_id}", request_id,
                step=name, previous=row["value"],
            )  # fmt: skip
