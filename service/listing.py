"""Keyset-paginated listings shared by the REST API and the web console.

A cursor is opaque to callers: the URL-safe base64 of `<created_at ISO>|<id>` of the last row
of a page; the next page holds the rows strictly older in `(created_at, id)` order, so rows
inserted meanwhile never shift or repeat a page (unlike OFFSET)."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime

from service.db import Cursor, fetch_all
from service.errors import ValidationFailed

RUN_STATUSES = ("queued", "running", "succeeded", "failed", "canceled", "skipped")


def encode_cursor(created_at: datetime, row_id: object) -> str:
    """The cursor that continues after a row with `created_at` and `row_id`."""
    raw = f"{created_at.isoformat()}|{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """`(created_at, id)` of a cursor; `ValidationFailed` (field `before`) if it is not one."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        at, _, row_id = base64.urlsafe_b64decode(padded.encode()).decode().partition("|")
        created_at = datetime.fromisoformat(at)
        if created_at.tzinfo is None:
            raise ValueError("naive timestamp")
        return created_at, str(uuid.UUID(row_id))
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        details = [{"field": "before", "message": "is not a cursor this API gave out"}]
        raise ValidationFailed("invalid query parameter", details=details) from exc


def list_runs(
    cur: Cursor,
    *,
    status: str | None,
    pipeline_id: str | None,
    limit: int,
    before: str | None,
) -> tuple[list[dict], str | None]:
    """Runs newest first, filtered by `status` and `pipeline_id` (None: any), at most
    `limit`, strictly after the cursor `before`; returns the rows (with `pipeline_name` and
    `queue_position`) and the cursor of the next page, or None on the last page.
    `ValidationFailed` for an unknown status, a malformed pipeline id or cursor."""
    if status is not None and status not in RUN_STATUSES:
        details = [{"field": "status", "message": f"must be one of {', '.join(RUN_STATUSES)}"}]
        raise ValidationFailed("invalid query parameter", details=details)
    if pipeline_id is not None:
        try:
            pipeline_id = str(uuid.UUID(pipeline_id))
        except ValueError as exc:
            details = [{"field": "pipeline_id", "message": "must be a UUID"}]
            raise ValidationFailed("invalid query parameter", details=details) from exc
    before_at, before_id = decode_cursor(before) if before else (None, None)
    params = {
        "status": status,
        "pipeline_id": pipeline_id,
        "before_at": before_at,
        "before_id": before_id,
        "limit": limit,
    }
    rows = fetch_all(cur, "list_runs", params)
    page, more = rows[:limit], len(rows) > limit
    last = page[-1] if page else None
    return page, encode_cursor(last["created_at"], last["id"]) if more and last else None
