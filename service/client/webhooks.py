"""`etl webhooks list|add|delete`: a pipeline's webhooks through the REST API (admin)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from service.client.command import (
    add_pipeline_action,
    dispatch,
    err_console,
    print_items,
    print_json,
)
from service.client.http import ApiClient

EVENTS = ("run.failed", "run.succeeded", "run.skipped")  # what the API accepts


def configure_webhooks(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="webhooks_command", required=True, metavar="ACTION")
    add_pipeline_action(sub, "list", "a pipeline's webhooks and their latest delivery")
    add = add_pipeline_action(sub, "add", "POST a signed JSON body to URL when a run ends")
    add.add_argument("url", metavar="URL", help="an http:// or https:// URL")
    add.add_argument(
        "--event",
        dest="events",
        action="append",
        choices=EVENTS,
        help="a run event to deliver (repeatable; default: all three)",
    )
    add.add_argument(
        "--secret", help="the HMAC-SHA256 secret, 16+ characters (default: one is generated)"
    )
    delete = add_pipeline_action(
        sub, "delete", "delete a webhook (its pending deliveries end)", json=False
    )
    delete.add_argument("webhook", metavar="WEBHOOK", help="webhook id")


def webhooks_list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline_id = client.find_pipeline(args.pipeline)["id"]
    items = list(client.pages(f"/pipelines/{pipeline_id}/webhooks", limit=500))
    return print_items(args, console, items, ["WEBHOOK", "EVENTS", "URL", "LAST DELIVERY"], _row)


def _row(w: dict[str, Any]) -> list[Any]:
    last = w.get("last_delivery") or {}
    delivery = f"{last['event']} {last['status']}" if last else "-"
    if last.get("last_error"):
        delivery += f" ({last['last_error']})"
    return [w["id"], ",".join(w["events"]), w["url"], delivery]


def webhooks_add(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    """Add a webhook; its secret goes alone to stdout (shown this once), what it is to
    stderr."""
    pipeline = client.find_pipeline(args.pipeline)
    body = {"url": args.url, "events": args.events or list(EVENTS)}
    if args.secret is not None:
        body["secret"] = args.secret
    _, created = client.request("POST", f"/pipelines/{pipeline['id']}/webhooks", body)
    if args.json:
        print_json(console, created)
        return 0
    err_console().print(
        f"added webhook {created['id']} to {pipeline['name']}: {', '.join(created['events'])}"
        f" -> {created['url']}; its signing secret below is shown this once:",
        markup=False,
    )
    print(created["secret"])
    return 0


def webhooks_delete(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    client.request("DELETE", f"/pipelines/{pipeline['id']}/webhooks/{args.webhook}")
    print(f"deleted webhook {args.webhook} of {pipeline['name']}")
    return 0


run_webhooks = dispatch(
    {"list": webhooks_list, "add": webhooks_add, "delete": webhooks_delete},
    "webhooks_command",
)
