"""Marshmallow schemas of the REST API's answers (dump; also the source of the OpenAPI
document): the error shape, pipelines, revisions, runs with their steps and attempts,
schedules, audit entries, and the summaries of the lists."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from marshmallow import Schema, fields, validate


class UtcDateTime(fields.DateTime):
    """An aware datetime dumped as ISO-8601 UTC with microseconds and a `Z`."""

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        if value is None:
            return None
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ErrorDetailSchema(Schema):
    field = fields.String()
    message = fields.String()


class ErrorSchema(Schema):
    code = fields.String()
    message = fields.String()
    details = fields.List(fields.Nested(ErrorDetailSchema))


class ErrorBodySchema(Schema):
    """Every 4xx/5xx answer."""

    error = fields.Nested(ErrorSchema)


class HealthSchema(Schema):
    status = fields.String()
    database = fields.String()


class PipelineSchema(Schema):
    """A pipeline with its current revision number and plan."""

    id = fields.String()
    name = fields.String()
    revision = fields.Integer()
    plan = fields.Raw()
    paused = fields.Boolean()
    created_at = UtcDateTime()
    updated_at = UtcDateTime()


class RevisionSchema(Schema):
    """An immutable plan snapshot."""

    pipeline_id = fields.String()
    revision = fields.Integer(attribute="number")
    plan = fields.Raw()
    created_by = fields.String()
    created_at = UtcDateTime()


class AttemptSchema(Schema):
    number = fields.Integer()
    executor = fields.String(allow_none=True)
    started_at = UtcDateTime(allow_none=True)
    finished_at = UtcDateTime(allow_none=True)
    outcome = fields.String(allow_none=True)
    error = fields.String(allow_none=True)
    # The step whose attempt this one ran inside (stage fusion), else null.
    fused_into = fields.String(allow_none=True)


class StepSchema(Schema):
    """One step of a run: state, attempts, counters, output column types, digests."""

    name = fields.String()
    type = fields.String()
    status = fields.String()
    attempts = fields.List(fields.Nested(AttemptSchema))
    records_in = fields.Integer()
    records_out = fields.Integer()
    rejected = fields.Integer()
    columns = fields.Dict(keys=fields.String(), values=fields.String())
    input_digest = fields.String(allow_none=True)
    output_digest = fields.String(allow_none=True)
    checkpoint = fields.Raw(allow_none=True)
    error = fields.String(allow_none=True)
    batches = fields.Integer()
    row_errors = fields.List(fields.Raw())
    # The results of the step's data checks (`dag.checks`), in plan order.
    checks = fields.List(fields.Raw())
    # A file ingest's columns added or removed since the pipeline's last succeeded run
    # (`{"added", "removed", "since_run"}`), else null (`dag.schemadrift`).
    schema_change = fields.Dict(allow_none=True)
    # An incremental table ingest's range (`{"table", "column", "after", "upto",
    # "late_rows"}`: above the mark `after`, up to `upto` and the snapshot fixed when the
    # step first started), else null (docs/plan-format.md, "Incremental table ingest").
    cursor_range = fields.Dict(allow_none=True)
    started_at = UtcDateTime(allow_none=True)
    finished_at = UtcDateTime(allow_none=True)


class RejectRowSchema(Schema):
    """One rejected row: where it was (`line` of the input file, `record` number), the
    `column` at fault (null for a whole-row problem), why, and the raw value or row."""

    line = fields.Integer(allow_none=True)
    record = fields.Integer(allow_none=True)
    column = fields.String(allow_none=True)
    reason = fields.String(allow_none=True)
    raw = fields.Raw(allow_none=True)


class StepRejectsSchema(Schema):
    """The first rejected rows of one step of a run (`items`, at most `limit`), out of
    `rejected`; `published`: read from the step's reject file (at `path`, on the
    coordinator), else the first row errors kept on the step until it commits."""

    run_id = fields.UUID()
    step = fields.String()
    rejected = fields.Integer()
    published = fields.Boolean()
    path = fields.String()
    items = fields.List(fields.Nested(RejectRowSchema))


class RunSchema(Schema):
    """A run with every step (the 429 answer of a skipped trigger has the same fields)."""

    id = fields.String()
    pipeline_id = fields.String()
    revision = fields.Integer()
    status = fields.String()
    reason = fields.String(allow_none=True)
    trigger_key = fields.String()
    trace_id = fields.String()
    created_at = UtcDateTime()
    started_at = UtcDateTime(allow_none=True)
    finished_at = UtcDateTime(allow_none=True)
    purged_at = UtcDateTime(allow_none=True)  # intermediate outputs purged (retention)
    queue_position = fields.Integer(allow_none=True)
    cancel_requested = fields.Boolean()
    created_by = fields.String()
    error = fields.String(allow_none=True)
    # every value of the run: given, defaulted and built-in (`run_id`, a fire's interval)
    params = fields.Dict(keys=fields.String(), values=fields.Raw())
    steps = fields.List(fields.Nested(StepSchema))


class RunSkippedSchema(RunSchema):
    """A refused trigger or resume (429): the run's fields, `status`/`reason` saying why,
    and `error` as the error object."""

    error = fields.Nested(ErrorSchema)


class ScheduleSchema(Schema):
    id = fields.String()
    pipeline_id = fields.String()
    every_minutes = fields.Integer(allow_none=True)
    daily_at = fields.String(allow_none=True)
    # a file-arrival schedule's glob (relative to ETL_DATA_DIR); it has no next_fire_at
    watch = fields.String(allow_none=True)
    files_pending = fields.Integer()  # a watch schedule's settled files waiting for room
    anchor_at = UtcDateTime()
    next_fire_at = UtcDateTime(allow_none=True)
    last_fired_at = UtcDateTime(allow_none=True)
    last_run_id = fields.String(allow_none=True)
    # why the newest fire made no run (`paused`, `plan_invalid`); null when it admitted one
    last_skip_reason = fields.String(
        allow_none=True, validate=validate.OneOf(["paused", "plan_invalid"])
    )
    catchup = fields.String(validate=validate.OneOf(["latest", "all"]))
    created_at = UtcDateTime()


class WebhookDeliverySchema(Schema):
    """A webhook's latest delivery: its event, how far it got and why it failed."""

    event_id = fields.String()
    event = fields.String()
    run_id = fields.String()
    status = fields.String()  # pending, delivered, failed (given up), canceled
    attempts = fields.Integer()
    last_status_code = fields.Integer(allow_none=True)
    last_error = fields.String(allow_none=True)
    created_at = fields.String()
    last_attempt_at = fields.String(allow_none=True)
    next_attempt_at = fields.String(allow_none=True)
    delivered_at = fields.String(allow_none=True)


class WebhookSchema(Schema):
    """A webhook as listed: never its secret."""

    id = fields.String()
    pipeline_id = fields.String()
    url = fields.String()
    events = fields.List(fields.String())
    created_by = fields.String()
    created_at = UtcDateTime()
    last_delivery = fields.Nested(WebhookDeliverySchema, allow_none=True)


class WebhookCreatedSchema(Schema):
    """The 201 answer of a new webhook: its secret, shown this once."""

    id = fields.String()
    pipeline_id = fields.String()
    url = fields.String()
    events = fields.List(fields.String())
    secret = fields.String()
    created_by = fields.String()
    created_at = UtcDateTime()


class AuditSchema(Schema):
    id = fields.Integer()
    principal = fields.String()
    action = fields.String()
    entity_type = fields.String()
    entity_id = fields.String()
    details = fields.Raw()
    trace_id = fields.String(allow_none=True)
    created_at = UtcDateTime()


# --- summaries ------------------------------------------------------------------------------


class LastRunSchema(Schema):
    id = fields.String()
    status = fields.String()
    created_at = UtcDateTime()
    finished_at = UtcDateTime(allow_none=True)


class PipelineSummarySchema(Schema):
    """A pipeline in a list: no plan; its step count, last run and schedules instead."""

    id = fields.String()
    name = fields.String()
    revision = fields.Integer()
    paused = fields.Boolean()  # its schedules make no runs and triggers are refused (409)
    steps = fields.Integer(allow_none=True)
    last_run = fields.Nested(LastRunSchema, allow_none=True)
    schedules = fields.Integer()
    next_fire_at = UtcDateTime(allow_none=True)
    created_at = UtcDateTime()
    updated_at = UtcDateTime()


class RevisionSummarySchema(Schema):
    """A revision in a list: no plan; its step count."""

    pipeline_id = fields.String()
    revision = fields.Integer(attribute="number")
    steps = fields.Integer(allow_none=True)
    created_by = fields.String()
    created_at = UtcDateTime()


class RunSummarySchema(RunSchema):
    """A run in a list: the run's fields, step counts by status instead of the steps."""

    pipeline_name = fields.String()
    steps = fields.Integer()
    step_counts = fields.Dict(keys=fields.String(), values=fields.Integer())
    records_out = fields.Integer()
    rejected = fields.Integer()


class TokenSchema(Schema):
    """A token's record: never its secret (shown once, by `IssuedToken`) or its hash."""

    id = fields.String()
    name = fields.String()
    role = fields.String()
    created_at = UtcDateTime()
    last_used_at = UtcDateTime(
        allow_none=True, metadata={"description": "written at most once a minute"}
    )
    expires_at = UtcDateTime(allow_none=True)
    revoked_at = UtcDateTime(allow_none=True)


class IssuedTokenSchema(TokenSchema):
    """A token just created or rotated, with its secret: shown this once."""

    token = fields.String()


PIPELINE = PipelineSchema()
REVISION = RevisionSchema()
RUN = RunSchema()
STEP_REJECTS = StepRejectsSchema()
SCHEDULE = ScheduleSchema()
PIPELINE_SUMMARY = PipelineSummarySchema()
REVISION_SUMMARY = RevisionSummarySchema()
RUN_SUMMARY = RunSummarySchema()
SCHEDULE_SUMMARY = ScheduleSchema()
AUDIT_ENTRY = AuditSchema()
WEBHOOK_SUMMARY = WebhookSchema()
WEBHOOK_CREATED = WebhookCreatedSchema()
TOKEN = TokenSchema()
ISSUED_TOKEN = IssuedTokenSchema()
