"""Marshmallow schemas of backfills: the `POST /pipelines/{id}/backfills` body and the
backfill answers (`GET /backfills/{id}`, the items of `GET /pipelines/{id}/backfills`). The
range's ends are typed by the plan's declaration of the parameter
(`service.domain.backfills`), so they load as raw JSON here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from service.schemas.responses import UtcDateTime

BACKFILL_STATUSES = ("running", "succeeded", "failed", "canceled")
# An end of the range in the OpenAPI document: a date (`YYYY-MM-DD`) or an integer.
_END = {"oneOf": [{"type": "string"}, {"type": "integer"}]}


class BackfillCreateSchema(Schema):
    """`{"param": NAME, "from": V, "to": V}`: one run per value from `from` to `to`
    inclusive (a `date` steps one day, an `int` one); or `{"schedule_id": ID, "from": T,
    "to": T}`: one run per fire time of the schedule from `from` to `to` inclusive (ISO
    8601 UTC to the second), each processing the interval that fire closes."""

    param = fields.String(validate=validate.Length(min=1, max=200))
    schedule_id = fields.UUID()
    value_from = fields.Raw(required=True, data_key="from", metadata=_END)
    value_to = fields.Raw(required=True, data_key="to", metadata=_END)

    @validates_schema
    def validate_one_kind(self, data: Mapping[str, Any], **kwargs: Any) -> None:
        if "param" in data and "schedule_id" in data:
            raise ValidationError("give either param or schedule_id, not both", "schedule_id")
        if "param" not in data and "schedule_id" not in data:
            raise ValidationError(
                "give param (an int or date parameter) or schedule_id (a schedule's intervals)",
                "param",
            )


class BackfillRunSchema(Schema):
    """One value of a backfill and its run (`run_id` null and `status` `pending` while it
    waits for room; `canceled` when the backfill was canceled first)."""

    value = fields.Raw()
    run_id = fields.String(allow_none=True)
    status = fields.String()


class BackfillSummarySchema(Schema):
    """A backfill in a list (`GET /pipelines/{id}/backfills`): its counters and status,
    without each value's run."""

    id = fields.String()
    pipeline_id = fields.String()
    param = fields.String()
    value_from = fields.Raw(data_key="from")
    value_to = fields.Raw(data_key="to")
    status = fields.String(validate=validate.OneOf(BACKFILL_STATUSES))
    total = fields.Integer()
    succeeded = fields.Integer()
    failed = fields.Integer()
    pending = fields.Integer()
    created_by = fields.String()
    created_at = UtcDateTime()
    canceled_at = UtcDateTime(allow_none=True)
    # a schedule's catch-up (`"catchup": "all"`): its values are the missed fire times
    schedule_id = fields.String(allow_none=True)


class BackfillSchema(BackfillSummarySchema):
    """A backfill (`GET /backfills/{id}`): its summary and each value's run."""

    runs = fields.List(fields.Nested(BackfillRunSchema))


BACKFILL = BackfillSchema()
BACKFILL_SUMMARY = BackfillSummarySchema()
