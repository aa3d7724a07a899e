"""Previews of plans, saved or not: what a plan does to the first records of its inputs, step
by step, before it runs (`actors.preview`). The REST API and the console's preview panel
both call `preview_with`; nothing is written but the caller's audit row (`plan_entity` names
an unsaved plan in it).

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


def plan_entity(plan: Any) -> str:
    """The audit entity of an unsaved plan: `plan:<sha256 prefix of its canonical JSON>`."""
    text = json.dumps(plan, sort_keys=True, separators=(",", ":"), default=str)
    return f"plan:{hashlib.sha256(text.encode()).hexdigest()[:16]}"
