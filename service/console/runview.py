"""The run page's model: the run with its steps and attempts (as the REST API sees them),
plus what only the console shows: the DAG coloured by state with progress, the attempts
timeline, the first rejected rows from the reject files and the export outputs."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from actors.sources import SOURCE_IMPLS
from actors.targets import TARGET_IMPLS
from dag import RUN_ACTIVE, StepStatus, attempts_that_ran
from ddl import connect
from service.console.graph import layout_dag, layout_gantt
from service.console.rerun import rerun_offer
from service.console.web import ConsoleSettings
from service.domain.db import Cursor, database_now
from service.domain.pipelines import get_pipeline, get_revision
from service.domain.rejects import rejects_of
from service.domain.runs import get_run_view, list_run_resumes

ACTIVE = tuple(RUN_ACTIVE)
REJECTS_SHOWN = 20


def build_run_page(cur: Cursor, settings: ConsoleSettings, run_id: str) -> dict[str, Any]:
    """Everything the run page draws, read in the caller's transaction; `NotFound` for an
    unknown run. A deleted pipeline's run is still drawn, under its pipeline's name with
    `pipeline_deleted` set (no link to its page, no Resume: both would be refused)."""
    view = get_run_view(cur, run_id)
    pipeline = get_pipeline(cur, str(view["pipeline_id"]), include_deleted=True)
    plan = get_revision(cur, str(view["pipeline_id"]), view["revision"])["plan"] or {}
    now = database_now(cur)
    deleted = pipeline.get("deleted_at") is not None
    plan_steps = [s for s in plan.get("steps", []) if isinstance(s, Mapping)]
    config = {str(s.get("name")): s.get("config") or {} for s in plan_steps}
    steps = view["steps"]
    by_name = {s["name"]: s for s in steps}
    for s in steps:
        s["config"] = config.get(s["name"], {})
        s["depends_on"] = next(
            (p.get("depends_on") or [] for p in plan_steps if p.get("name") == s["name"]), []
        )
        s["progress"] = step_progress(s, by_name, settings.data_dir)
    return {
        "run": view,
        "trace_link": settings.trace_link(view.get("trace_id")),
        "pipeline_name": pipeline.get("name", "?"),
        "pipeline_deleted": deleted,
        "steps": steps,
        "by_name": by_name,
        "dag": layout_dag(plan_steps),
        "gantt": layout_gantt(
            [(s["name"], attempts_that_ran(s["status"], s["attempts"])) for s in steps],
            now,
            list_run_resumes(cur, run_id),
        ),
        "rejects": [
            (s["name"], _rejects(settings, run_id, s))
            for s in steps
            if s["rejected"] or s["row_errors"]
        ],
        "exports": [_export(settings, run_id, s) for s in steps if s["type"] == "export"],
        "active": view["status"] in ACTIVE,
        "rerun": rerun_offer(
            view, pipeline.get("revision"), pipeline.get("deleted_at") is not None
        ),
        "now": now,
    }


def step_progress(
    step: Mapping[str, Any], steps: Mapping[str, Mapping[str, Any]], data_dir: Path
) -> float | None:
    """A running step's done fraction where the total is known: a file ingest by its
    checkpoint's byte offset over the file size; a step reading upstream output by records
    in over its finished upstreams' records out; a fused follower (its one upstream runs
    with it, batch by batch) by its upstream's. 1.0 once succeeded; None when unknown."""
    if step["status"] == StepStatus.SUCCEEDED:
        return 1.0
    if step["status"] not in (StepStatus.RUNNING, StepStatus.RETRY_WAIT):
        return None
    cfg = step.get("config") or {}
    if step["type"] == "ingest":
        source = SOURCE_IMPLS.get(cfg.get("source"))
        return (
            None if source is None else source.progress(cfg, step.get("checkpoint") or {}, data_dir)
        )
    upstream = [steps.get(d) for d in step.get("depends_on") or []]
    if len(upstream) == 1 and upstream[0] and upstream[0]["status"] == StepStatus.RUNNING:
        return step_progress(upstream[0], steps, data_dir)
    if not upstream or any(u is None or u["status"] != StepStatus.SUCCEEDED for u in upstream):
        return None
    total = sum(u["records_out"] for u in upstream if u)
    return min(step["records_in"] / total, 1.0) if total else None


def _rejects(settings: ConsoleSettings, run_id: str, step: dict[str, Any]) -> dict[str, Any]:
    found = rejects_of(settings.reject_dir, run_id, step, limit=REJECTS_SHOWN)
    return {"path": found["path"], "published": found["published"], "rows": found["items"]}


def _export(settings: ConsoleSettings, run_id: str, step: Mapping[str, Any]) -> dict[str, Any]:
    """What the run page shows of an export's output, by its target (`actors.targets`)."""
    cfg = step.get("config") or {}
    out: dict[str, Any] = {"step": step["name"], "target": cfg.get("target")}
    target = TARGET_IMPLS.get(cfg.get("target"))
    if target is None:
        return out
    url = settings.sandbox_url
    sandbox = None if url is None else partial(connect, url, "etl-console", connect_timeout_s=5)
    return {**out, **target.run_view(settings.export_dir, run_id, step, sandbox)}
