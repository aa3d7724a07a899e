"""`POST /api/v1/pipelines/preview`: the preview of a plan in the body, or of a saved
pipeline's revision, as JSON (the same answer as `etl preview --json`).

Roles as `POST /pipelines`. Bounded: at most `MAX_RECORDS` records per ingest, a time limit
checked at every batch boundary (a step past it fails, the rest do not run), the body cap of
every request. File ingests go through the ingest path guard; a table ingest reads the
sandbox read-only. Nothing is persisted but one audit row."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

import falcon
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from actors.preview import DEFAULT_RECORDS, MAX_RECORDS, PlanPreview, preview_plan
from dag.plan import parse_plan
from ddl import connector
from service.auth import ADMIN_ONLY
from service.config import Config
from service.db import fetch_one
from service.errors import NotFound
from service.listing import UUID_TEXT
from service.resources import Resource, get_pipeline, read_json
from service.schemas import check_plan

TIME_LIMIT_S = 5.0


class PreviewRequestSchema(Schema):
    """`{"plan"}` (a `name` may ride along, as in `POST /pipelines`) or `{"pipeline_id",
    "revision"?}` (default: the current revision), plus `records` (1..MAX_RECORDS)."""

    name = fields.String()
    plan = fields.Raw()
    pipeline_id = fields.String(
        validate=validate.Regexp(
            rf"{UUID_TEXT.pattern}\Z", error="must be a UUID (8-4-4-4-12 hex digits)"
        )
    )
    revision = fields.Integer(strict=True, validate=validate.Range(min=1))
    records = fields.Integer(
        strict=True, validate=validate.Range(min=1, max=MAX_RECORDS), load_default=DEFAULT_RECORDS
    )

    @validates_schema
    def validate_one_source(self, data: Mapping[str, Any], **kwargs: Any) -> None:
        if ("plan" in data) == ("pipeline_id" in data):
            raise ValidationError("give either plan or pipeline_id", "plan")
        if "revision" in data and "pipeline_id" not in data:
            raise ValidationError("revision needs pipeline_id", "revision")
        if "name" in data and "plan" not in data:
            raise ValidationError("name rides along with a plan only", "name")


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


class PreviewResource(Resource):
    roles = {"POST": ADMIN_ONLY}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req, PreviewRequestSchema())
        if "plan" in body:
            plan = body["plan"]
            entity = plan_entity(plan)
            revision = None
        else:
            pipeline_id = str(uuid.UUID(body["pipeline_id"]))
            plan, revision = self._saved_plan(pipeline_id, body.get("revision"))
            entity = f"pipeline:{pipeline_id}"
        preview = preview_with(self.deps.config, plan, body["records"])
        with self.deps.db.transaction() as cur:
            what = {"records": body["records"], "ok": not preview.failed}
            if revision is not None:
                what["revision"] = revision
            self.audit(cur, req, "pipeline.preview", entity, **what)
        resp.media = preview.as_dict()

    def _saved_plan(self, pipeline_id: str, number: int | None) -> tuple[Any, int]:
        with self.deps.db.transaction() as cur:
            if number is None:
                row = get_pipeline(cur, pipeline_id)
                return row["plan"], row["revision"]
            params = {"pipeline_id": pipeline_id, "number": number}
            row = fetch_one(cur, "get_revision", params)
        if row is None:
            raise NotFound(f"revision {number} of pipeline {pipeline_id} not found")
        return row["plan"], number
