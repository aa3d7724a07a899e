"""Bounded lists: every list endpoint answers one keyset page of summaries,
`{"items": [...], "next": <cursor> | null}`, newest first.

A page is at most `limit` items (default `DEFAULT_LIMIT`, at most `MAX_LIMIT`). `next` is an
opaque cursor naming the sort key of the page's last item; passing it back as `?before=`
gives the following page. Ties in a timestamp are broken by the row's id, so a walk over
every page shows each row exactly once even while new rows arrive (they sort before the
cursor). A cursor is bound to its kind of list: a runs cursor is refused by the audit list.

The queries live in `service/domain/sql/listing.sql`; items are summaries (no plan, no step
details), dumped by the summary schemas of `service.schemas.responses`."""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from marshmallow import Schema

from dag import RunStatus
from service.domain.backfills import backfill_status
from service.domain.db import Cursor, fetch_all
from service.domain.runs import pending_step_view
from service.errors import ValidationFailed
from service.schemas.requests import UUID_TEXT

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
RUN_STATUSES = tuple(RunStatus)

CURSOR_TEXT = re.compile(r"[A-Za-z0-9_-]{1,400}")
# The largest keys PostgreSQL's columns hold: a bigger cursor key is forged (and would make
# the query fail with an out-of-range error rather than a 400).
INTEGER_MAX = 2**31 - 1
BIGINT_MAX = 2**63 - 1

Page = tuple[list[dict[str, Any]], str | None]


# --- parameters ------------------------------------------------------------------------------


def _invalid(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(
        "invalid query parameter", details=[{"field": field, "message": message}]
    )


def parse_limit(raw: str | None) -> int:
    """The `?limit=` parameter: 1..MAX_LIMIT, DEFAULT_LIMIT when absent; else a 400 naming
    `limit`."""
    if raw is None:
        return DEFAULT_LIMIT
    # int() of the significant digits only, and of at most 3: int() of over 4,300 digits
    # (leading zeros too) raises ValueError, which would be a 500
    digits = raw.lstrip("0")
    if not (raw.isascii() and raw.isdigit() and len(digits) <= 3 and digits):
        raise _invalid("limit", f"must be an integer 1..{MAX_LIMIT}")
    if not 1 <= int(digits) <= MAX_LIMIT:
        raise _invalid("limit", f"must be an integer 1..{MAX_LIMIT}")
    return int(digits)


def parse_statuses(raw: str | Sequence[str] | None) -> list[str] | None:
    """`?status=`: one run status or several, comma-separated (spaces and tabs around them
    and empty items ignored); None means every status."""
    if raw is None:
        return None
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    statuses = [s.strip(" \t") for s in items if s.strip(" \t")]
    unknown = [s for s in statuses if s not in RUN_STATUSES]
    if unknown or not statuses:
        raise _invalid("status", f"must be one or more of {', '.join(RUN_STATUSES)}")
    return statuses


def parse_uuid(raw: str | None, field: str) -> str | None:
    """An optional id parameter (`8-4-4-4-12` hex digits) as a canonical UUID string; any
    other text (also the other spellings `uuid.UUID` takes) is a 400."""
    if raw is None:
        return None
    if not UUID_TEXT.fullmatch(raw):
        raise _invalid(field, "must be a UUID (8-4-4-4-12 hex digits)")
    return str(uuid.UUID(raw))


def parse_day(raw: str | None, field: str) -> datetime | None:
    """An optional `YYYY-MM-DD` day as its first instant in UTC; other text is a 400."""
    if raw is None:
        return None
    try:
        return datetime.combine(date.fromisoformat(raw), time(), tzinfo=UTC)
    except ValueError:
        raise _invalid(field, "must be a day YYYY-MM-DD") from None


def _next_day(day: datetime | None) -> datetime | None:
    return None if day is None else day + timedelta(days=1)


# --- cursors ---------------------------------------------------------------------------------


def encode_cursor(kind: str, *key: Any) -> str:
    """An opaque cursor for list `kind` after the row whose sort key is `key`."""
    values = [v.isoformat() if isinstance(v, datetime) else str(v) for v in key]
    raw = json.dumps([kind, *values], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str, kind: str, arity: int) -> list[str]:
    """The `arity` key values of a cursor made by `encode_cursor(kind, ...)`; anything else
    (garbage, another list's cursor) is a 400 naming `before`."""
    bad = _invalid("before", "is not a cursor of this list (use the `next` of a page)")
    if not CURSOR_TEXT.fullmatch(cursor):
        raise bad
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        data = json.loads(raw)
    except (binascii.Error, ValueError):
        raise bad from None
    ok = isinstance(data, list) and len(data) == arity + 1 and data[0] == kind
    if not ok or not all(isinstance(v, str) for v in data[1:]):
        raise bad
    return data[1:]


def _time_and_id(cursor: str | None, kind: str) -> dict[str, Any]:
    """`before_at`/`before_id` query parameters from a (timestamp, uuid) cursor."""
    if cursor is None:
        return {"before_at": None, "before_id": None}
    at, row_id = decode_cursor(cursor, kind, 2)
    try:
        when = datetime.fromisoformat(at)
        parsed_id = uuid.UUID(row_id)
        # in UTC: PostgreSQL takes no fractional-second offset, and year 1 with a
        # positive offset is out of Python's range (OverflowError)
        when = when.astimezone(UTC) if when.tzinfo is not None else None
    except (ValueError, OverflowError):
        raise _invalid("before", "is not a cursor of this list") from None
    if when is None:
        raise _invalid("before", "is not a cursor of this list")
    return {"before_at": when, "before_id": str(parsed_id)}


def _integer(cursor: str | None, kind: str, maximum: int) -> int | None:
    """The key of a cursor naming an integer 0..`maximum`."""
    if cursor is None:
        return None
    (value,) = decode_cursor(cursor, kind, 1)
    if not (value.isascii() and value.isdigit()) or int(value) > maximum:
        raise _invalid("before", "is not a cursor of this list")
    return int(value)


def _page(
    cur: Cursor, query: str, params: Mapping[str, Any], limit: int, key: Any
) -> tuple[list[dict[str, Any]], Any]:
    """Up to `limit` rows of `query` and the sort key of the last one when more follow."""
    rows = fetch_all(cur, query, {**params, "limit": limit + 1})
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, key(rows[-1])


# --- the lists -------------------------------------------------------------------------------


def list_pipelines(
    cur: Cursor, *, name: str | None = None, limit: int = DEFAULT_LIMIT, before: str | None = None
) -> Page:
    """Pipeline summaries newest first (only the one called `name` when given)."""
    params = {"name": name, **_time_and_id(before, "pipelines")}
    rows, last = _page(
        cur, "list_pipeline_summaries", params, limit, lambda r: (r["created_at"], r["id"])
    )
    for row in rows:
        run_id = row.pop("last_run_id")
        status, created, finished = (
            row.pop("last_run_status"),
            row.pop("last_run_created_at"),
            row.pop("last_run_finished_at"),
        )
        row["last_run"] = (
            {"id": run_id, "status": status, "created_at": created, "finished_at": finished}
            if run_id is not None
            else None
        )
    return rows, last and encode_cursor("pipelines", *last)


def list_revisions(
    cur: Cursor, *, pipeline_id: str, limit: int = DEFAULT_LIMIT, before: str | None = None
) -> Page:
    """A pipeline's revision summaries, newest first."""
    params = {
        "pipeline_id": pipeline_id,
        "before_number": _integer(before, "revisions", INTEGER_MAX),
    }
    rows, last = _page(cur, "list_revision_summaries", params, limit, lambda r: (r["number"],))
    return rows, last and encode_cursor("revisions", *last)


def list_runs(
    cur: Cursor,
    *,
    status: str | Sequence[str] | None,
    pipeline_id: str | None,
    limit: int,
    before: str | None,
    created_from: str | None = None,
    created_to: str | None = None,
) -> Page:
    """Run summaries newest first, optionally of some statuses (a status, a comma-separated
    string or a sequence) and of one pipeline. Each item has the run's fields, `steps` (how
    many) and `step_counts` ({step status: count}) instead of step details, `records_out`
    and `rejected` summed over its steps, and `error` (its first failed step's).
    `created_from` and `created_to` (`YYYY-MM-DD`, UTC, both days included) bound when the
    runs were created. Bad parameters raise `ValidationFailed` naming the field."""
    params = {
        "statuses": parse_statuses(status),
        "pipeline_id": parse_uuid(pipeline_id, "pipeline_id"),
        "created_from": parse_day(created_from, "from"),
        "created_before": _next_day(parse_day(created_to, "to")),
        **_time_and_id(before, "runs"),
    }
    rows, last = _page(
        cur, "list_run_summaries", params, limit, lambda r: (r["created_at"], r["id"])
    )
    for row in rows:
        plan_steps = row.pop("plan_steps")
        if row["step_counts"] is None:  # never started: every plan step in one state
            unstarted = pending_step_view({}, row["status"])["status"]
            row["step_counts"] = {unstarted: plan_steps} if plan_steps else {}
        row["steps"] = sum(row["step_counts"].values())
        row["records_out"] = int(row["records_out"] or 0)
        row["rejected"] = int(row["rejected"] or 0)
    return rows, last and encode_cursor("runs", *last)


def list_schedules(
    cur: Cursor, *, pipeline_id: str, limit: int = DEFAULT_LIMIT, before: str | None = None
) -> Page:
    """A pipeline's live schedules, newest first."""
    params = {"pipeline_id": pipeline_id, **_time_and_id(before, "schedules")}
    rows, last = _page(
        cur, "list_schedule_summaries", params, limit, lambda r: (r["created_at"], r["id"])
    )
    return rows, last and encode_cursor("schedules", *last)


def list_backfills(
    cur: Cursor, *, pipeline_id: str, limit: int = DEFAULT_LIMIT, before: str | None = None
) -> Page:
    """A pipeline's backfills, newest first, with their counters and status (no values:
    `service.domain.backfills.get_backfill_view` has them)."""
    params = {"pipeline_id": pipeline_id, **_time_and_id(before, "backfills")}
    rows, last = _page(
        cur, "list_backfill_summaries", params, limit, lambda r: (r["created_at"], r["id"])
    )
    return [{**r, "status": backfill_status(r)} for r in rows], last and encode_cursor(
        "backfills", *last
    )


def list_webhooks(
    cur: Cursor, *, pipeline_id: str, limit: int = DEFAULT_LIMIT, before: str | None = None
) -> Page:
    """A pipeline's live webhooks, newest first, each with its latest delivery (never the
    secret)."""
    params = {"pipeline_id": pipeline_id, **_time_and_id(before, "webhooks")}
    rows, last = _page(
        cur, "list_webhook_summaries", params, limit, lambda r: (r["created_at"], r["id"])
    )
    return rows, last and encode_cursor("webhooks", *last)


def list_audit(
    cur: Cursor,
    *,
    filters: Mapping[str, str | None],
    limit: int = DEFAULT_LIMIT,
    before: str | None = None,
) -> Page:
    """Audit rows newest first; `filters` may hold `entity_id`, `entity_type`, `action`,
    `principal` (exact matches)."""
    params = {k: filters.get(k) for k in AUDIT_FILTERS}
    params["before_id"] = _integer(before, "audit", BIGINT_MAX)
    rows, last = _page(cur, "list_audit_entries", params, limit, lambda r: (r["id"],))
    return rows, last and encode_cursor("audit", *last)


AUDIT_FILTERS = ("entity_id", "entity_type", "action", "principal")


def page_body(schema: Schema, page: Page) -> dict[str, Any]:
    """`{"items": [...], "next": cursor | null}` with the items dumped by `schema`."""
    rows, next_cursor = page
    return {"items": schema.dump(rows, many=True), "next": next_cursor}


def list_tokens(cur: Cursor, *, limit: int = DEFAULT_LIMIT, before: str | None = None) -> Page:
    """Token records newest first, revoked and expired ones too (never a secret or hash)."""
    params = _time_and_id(before, "tokens")
    rows, last = _page(
        cur, "list_token_summaries", params, limit, lambda r: (r["created_at"], r["id"])
    )
    return rows, last and encode_cursor("tokens", *last)
