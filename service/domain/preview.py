"""Previews of plans, saved or not: what a plan does to the first records of its inputs, step
by step, before it runs (`actors.preview`). The REST API and the console's preview panel
both call `preview_with`; nothing is written but the caller's audit row (`plan_entity` names
an unsaved plan in it). `preview_answer` is what they send: the bounded answer, built
while the preview's records are alive and with none of them left once it returns.

Bounded: at most `MAX_RECORDS` records per ingest, a time limit checked at every batch
boundary (a step past it fails, the rest do not run). File ingests go through the ingest path
guard; a table ingest reads the sandbox read-only."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from actors.preview import PlanPreview, preview_plan
from dag.plan import parse_plan
from ddl import connector
from service.config import Config
from service.domain.memory import release_memory
from service.schemas.requests import check_plan

TIME_LIMIT_S = 5.0


def preview_with(cfg: Config, plan: Any, records: int) -> PlanPreview:
    """`plan` checked (400 with field paths) and previewed on its first `records` records
    with the service's directories: the path guard of ingest, a read-only sandbox, every
    statement and the whole preview bounded by `TIME_LIMIT_S`. Writes nothing. The API and
    the console's preview panel both call this."""
    check_plan(plan)
    sandbox = connector(
        cfg.sandbox_url, "etl-api-preview", connect_timeout_s=2, statement_timeout_s=TIME_LIMIT_S
    )
    return preview_plan(
        parse_plan(plan),
        data_dir=cfg.data_dir,
        export_dir=cfg.export_dir,
        records=records,
        sandbox_connect=sandbox,
        time_limit_s=TIME_LIMIT_S,
    )


def preview_answer(cfg: Config, plan: Any, records: int) -> dict[str, Any]:
    """The answer of `preview_with` (`PlanPreview.as_dict`: long values cut, bounded in
    bytes). The preview's records are let go before it returns, and the memory they held
    is given back to the system (`service.domain.memory`): a worker that previewed a
    50 MiB value is back where it began, not holding the allocator's free pages."""
    preview = preview_with(cfg, plan, records)
    try:
        return preview.as_dict()
    finally:
        del preview
        release_memory()


def plan_entity(plan: Any) -> str:
    """The audit entity of an unsaved plan: `plan:<sha256 prefix of its canonical JSON>`."""
    text = json.dumps(plan, sort_keys=True, separators=(",", ":"), default=str)
    return f"plan:{hashlib.sha256(text.encode()).hexdigest()[:16]}"
