"""Webhooks: per pipeline, URLs told when a run ends (`run.succeeded`, `run.failed`,
`run.skipped`), and the outbox of their deliveries. The API creates, lists and deletes them
(admins only); the console shows them with their latest deliveries; the notifier
(`service.notifier`) claims due deliveries and records each attempt here.

Nothing in Python writes an outbox row: the trigger of `ddl/migrations/0011_webhooks.sql`
inserts one per matching webhook in the transaction that ends the run (at its COMMIT), so
no path that ends a run (the advancer, a failed plan, admission recording a skip, the
scheduler) can forget one, and no crash between the run's end and the delivery can lose
one. Every function takes the caller's cursor and runs in the caller's transaction; changes
write their audit row there.

A delivery's body is built once and stored before its first attempt, so every retry sends
the same bytes, the same `event_id` and the same signature:
`X-ETL-Signature: sha256=<hex HMAC-SHA256 of the body with the webhook's secret>`."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from service.domain.audit import insert_audit
from service.domain.db import Cursor, execute, fetch_all, fetch_one
from service.domain.principals import new_secret
from service.errors import Conflict, NotFound

MAX_WEBHOOKS_PER_PIPELINE = 20
SIGNATURE_HEADER = "X-ETL-Signature"
PRINCIPAL = "notifier"  # who the audit trail names for a delivery given up


def create_webhook(
    cur: Cursor,
    pipeline_id: str,
    body: Mapping[str, Any],
    principal: str,
    *,
    webhook_id: str,
    request_id: str | None,
) -> dict:
    """A new webhook of `pipeline_id` from a loaded `WebhookCreateSchema` body (its own
    `secret`, or a new random one), with its audit row; the row, secret included
    (shown once). `NotFound` for an unknown or deleted pipeline (one deleted while this
    waited on its row lock included), `Conflict` past `MAX_WEBHOOKS_PER_PIPELINE`."""
    _lock_live_pipeline(cur, pipeline_id)
    live = fetch_one(cur, "count_live_webhooks", {"pipeline_id": pipeline_id})
    if live is not None and live["n"] >= MAX_WEBHOOKS_PER_PIPELINE:
        raise Conflict(
            f"pipeline {pipeline_id} already has {MAX_WEBHOOKS_PER_PIPELINE} webhooks;"
            " delete one first"
        )
    events = list(dict.fromkeys(body["events"]))  # a repeated event is asked for once
    row = fetch_one(
        cur,
        "insert_webhook",
        {
            "id": webhook_id,
            "pipeline_id": pipeline_id,
            "url": body["url"],
            "events": events,
            "secret": body.get("secret") or new_secret(),
            "created_by": principal,
        },
    )
    assert row is not None
    insert_audit(
        cur,
        principal=principal,
        action="webhook.create",
        entity_type="webhook",
        entity_id=row["id"],
        details={"pipeline_id": pipeline_id, "url": row["url"], "events": events},
        trace_id=request_id,
    )
    return row


def delete_webhook(
    cur: Cursor, pipeline_id: str, webhook_id: str, principal: str, *, request_id: str | None
) -> None:
    """Delete a live webhook of `pipeline_id` (nothing more is sent to it; its pending
    deliveries are canceled), with its audit row; `NotFound` if it or its pipeline is
    unknown or deleted."""
    _lock_live_pipeline(cur, pipeline_id)
    params = {"pipeline_id": pipeline_id, "webhook_id": webhook_id}
    row = fetch_one(cur, "delete_webhook", params)
    if row is None:
        raise NotFound(f"webhook {webhook_id} of pipeline {pipeline_id} not found")
    execute(cur, "cancel_webhook_deliveries", params)
    insert_audit(
        cur,
        principal=principal,
        action="webhook.delete",
        entity_type="webhook",
        entity_id=webhook_id,
        details={"pipeline_id": pipeline_id, "url": row["url"], "canceled": cur.rowcount},
        trace_id=request_id,
    )


def delete_pipeline_webhooks(cur: Cursor, pipeline_id: str) -> tuple[int, int]:
    """With the delete of `pipeline_id` (`service.domain.pipelines.delete_pipeline`, which
    holds the pipeline's row lock and writes the audit row): its live webhooks are
    soft-deleted and their pending deliveries canceled. (webhooks deleted, deliveries
    canceled)."""
    params = {"pipeline_id": pipeline_id}
    execute(cur, "delete_pipeline_webhooks", params)
    deleted = cur.rowcount
    execute(cur, "cancel_pipeline_deliveries", params)
    return deleted, cur.rowcount


def _lock_live_pipeline(cur: Cursor, pipeline_id: str) -> None:
    if fetch_one(cur, "lock_live_pipeline", {"pipeline_id": pipeline_id}) is None:
        raise NotFound(f"pipeline {pipeline_id} not found")


def list_recent_deliveries(cur: Cursor, pipeline_id: str, limit: int = 10) -> list[dict]:
    """The latest deliveries to the live webhooks of `pipeline_id`, newest first."""
    return fetch_all(cur, "list_recent_deliveries", {"pipeline_id": pipeline_id, "limit": limit})


# --- the outbox (the notifier's side) ---------------------------------------------------------


def delivery_body(delivery: Mapping[str, Any], public_url: str) -> str:
    """The JSON body of a delivery: `{"event_id", "event", "run", "console_url"}`, `run`
    being the run's summary when it ended (as an item of `GET /api/v1/runs`) and
    `console_url` its page in the web console under `public_url`."""
    return json.dumps(
        {
            "event_id": str(delivery["event_id"]),
            "event": delivery["event"],
            "run": delivery["run"],
            "console_url": f"{public_url.rstrip('/')}/ui/runs/{delivery['run_id']}",
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def signature(body: bytes, secret: str) -> str:
    """The `X-ETL-Signature` value of `body`: `sha256=<hex HMAC-SHA256 with secret>`."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def claim_due_delivery(cur: Cursor) -> dict | None:
    """The oldest due pending delivery that nobody holds, row-locked until the caller's
    transaction ends (so a caller that dies mid-POST lets the next claim take it again),
    with its webhook's URL and secret; None when nothing is due."""
    return fetch_one(cur, "claim_due_delivery", {})


def store_delivery_body(cur: Cursor, delivery_id: int, body: str) -> None:
    """Store the body every attempt of a delivery sends (only if none is stored yet)."""
    execute(cur, "set_delivery_body", {"id": delivery_id, "body": body})


def record_delivered(cur: Cursor, delivery_id: int, status_code: int) -> None:
    """The receiver answered 2xx: the delivery is done."""
    execute(cur, "record_delivered", {"id": delivery_id, "status_code": status_code})


def record_attempt_failed(
    cur: Cursor,
    delivery: Mapping[str, Any],
    *,
    status_code: int | None,
    error: str,
    delay_s: float,
    give_up: bool,
) -> None:
    """An attempt failed: retry after `delay_s`, or (`give_up`) mark the delivery failed,
    with an audit row saying so."""
    execute(
        cur,
        "record_attempt_failed",
        {
            "id": delivery["id"],
            "status_code": status_code,
            "error": error[:1000],
            "delay_s": delay_s,
            "give_up": give_up,
        },
    )
    if give_up:
        insert_audit(
            cur,
            principal=PRINCIPAL,
            action="webhook.delivery_given_up",
            entity_type="webhook",
            entity_id=str(delivery["webhook_id"]),
            details={
                "pipeline_id": str(delivery["pipeline_id"]),
                "event_id": str(delivery["event_id"]),
                "event": delivery["event"],
                "run_id": str(delivery["run_id"]),
                "attempts": delivery["attempts"] + 1,
                "last_status_code": status_code,
                "last_error": error[:1000],
            },
            trace_id=delivery["run"].get("trace_id"),
        )


def cancel_delivery(cur: Cursor, delivery_id: int) -> None:
    """End a delivery of a webhook deleted meanwhile, without sending it."""
    execute(cur, "cancel_delivery", {"id": delivery_id})


def purge_finished_deliveries(cur: Cursor, older_than_s: float) -> int:
    """Delete the deliveries that ended (delivered, given up, canceled) and were created more
    than `older_than_s` ago; pending ones stay whatever their age. The number deleted."""
    execute(cur, "purge_finished_deliveries", {"older_than_s": older_than_s})
    return cur.rowcount
