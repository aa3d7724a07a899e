"""The audit trail: who did what to which entity, written in the caller's transaction so
that a change and its audit row commit together or not at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg2.extras

from service.domain.db import Cursor, execute, fetch_all


def insert_audit(
    cur: Cursor,
    *,
    principal: str,
    action: str,
    entity_type: str,
    entity_id: str,
    details: Mapping[str, Any] | None = None,
    trace_id: str | None = None,
) -> None:
    """Record who did what to which entity, in the caller's transaction."""
    execute(
        cur,
        "insert_audit",
        {
            "principal": principal,
            "action": action,
            "entity_type": entity_type,
            "entity_id": str(entity_id),
            "details": psycopg2.extras.Json(dict(details or {})),
            "trace_id": trace_id,
        },
    )


def audit_change(
    cur: Cursor, principal: str, action: str, entity: str, request_id: str | None, **details: Any
) -> None:
    """An audit row for `action` on `entity` (`"type:id"`) by `principal`; the trace id of a
    change that is not a run's is the request id."""
    entity_type, _, entity_id = entity.partition(":")
    insert_audit(
        cur,
        principal=principal,
        action=action,
        entity_type=entity_type,
        entity_id=entity_id,
        details=details,
        trace_id=request_id,
    )


def list_audit_actions(cur: Cursor) -> list[str]:
    """The distinct actions of the audit trail, sorted (the console's filter choices)."""
    return [r["action"] for r in fetch_all(cur, "list_audit_actions")]
