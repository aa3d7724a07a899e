"""`etl backfill PIPELINE (--param NAME | --schedule ID) --from V --to V [--wait]`: one run
per value of the range, or per fire of a schedule's intervals (POST
/pipelines/{id}/backfills), and with `--wait` its progress until it ends; and
`etl backfills list PIPELINE` and `etl backfills show|cancel BACKFILL`. Exit status with
`--wait`: 0 every value's run succeeded, 1 one failed, 3 the backfill was canceled."""

from __future__ import annotations

import argparse
import time
from typing import Any

from rich.console import Console

from service.client.command import (
    add_json,
    add_pipeline_action,
    dispatch,
    print_items,
    print_json,
    print_table,
)
from service.client.http import ApiClient
from service.client.params import typed_value

POLL_S = 1.0
_EXIT = {"succeeded": 0, "failed": 1, "canceled": 3}


def configure_backfill(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    kind = parser.add_mutually_exclusive_group(required=True)
    kind.add_argument("--param", metavar="NAME", help="an int or date parameter")
    kind.add_argument(
        "--schedule",
        metavar="ID",
        help="a schedule of the pipeline: one run per fire from --from to --to (UTC times,"
        " YYYY-MM-DDTHH:MM:SSZ), each processing the interval it closes",
    )
    parser.add_argument("--from", dest="first", required=True, metavar="V", help="first value")
    parser.add_argument("--to", dest="last", required=True, metavar="V", help="last value")
    parser.add_argument("--wait", action="store_true", help="show progress until it ends")
    add_json(parser)


def configure_backfills(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="backfills_command", required=True, metavar="ACTION")
    ls = add_pipeline_action(sub, "list", "a pipeline's backfills, newest first")
    ls.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    for name, text in (("show", "a backfill and each value's run"), ("cancel", "cancel it")):
        p = sub.add_parser(name, help=text)
        p.add_argument("backfill", metavar="BACKFILL", help="backfill id")
        add_json(p)


def _create(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    if args.schedule is not None:
        body: dict[str, Any] = {"schedule_id": args.schedule, "from": args.first, "to": args.last}
        what = f"intervals of schedule {args.schedule}"
    else:
        plan = pipeline.get("plan") or {}
        body = {
            "param": args.param,
            "from": typed_value(plan, args.param, args.first),
            "to": typed_value(plan, args.param, args.last),
        }
        what = f"values of {args.param}"
    backfill = client.request("POST", f"/pipelines/{pipeline['id']}/backfills", body)[1]
    if not args.json:
        print(
            f"backfill {backfill['id']}: {backfill['total']} {what} (pipeline {pipeline['name']})"
        )
    if not args.wait:
        if args.json:
            print_json(console, backfill)
        return 0
    final = follow(client, backfill["id"], quiet=args.json)
    if args.json:
        print_json(console, final)
    return _EXIT.get(final["status"], 1)


def follow(client: ApiClient, backfill_id: str, *, quiet: bool, poll_s: float = POLL_S) -> dict:
    """Poll a backfill until it ends, printing a progress line whenever it changes."""
    last = ""
    while True:
        backfill = client.request("GET", f"/backfills/{backfill_id}")[1]
        line = progress_line(backfill)
        if line != last and not quiet:
            print(line, flush=True)
            last = line
        if backfill["status"] != "running":
            return backfill
        time.sleep(poll_s)


def progress_line(backfill: dict) -> str:
    """`running: 12/31 succeeded, 0 failed, 17 pending (2013-01-13 running)`."""
    active = [str(r["value"]) for r in backfill["runs"] if r["status"] in ("queued", "running")]
    now = f" ({', '.join(active)} active)" if active else ""
    return (
        f"{backfill['status']}: {backfill['succeeded']}/{backfill['total']} succeeded,"
        f" {backfill['failed']} failed, {backfill['pending']} pending{now}"
    )


def _show(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    backfill = client.request("GET", f"/backfills/{args.backfill}")[1]
    if args.json:
        print_json(console, backfill)
        return 0
    print(f"backfill {backfill['id']} of {backfill['param']}: {progress_line(backfill)}")
    rows = [[r["value"], r["status"], r["run_id"] or "-"] for r in backfill["runs"]]
    print_table(console, ["VALUE", "STATUS", "RUN"], rows)
    return 0


def _list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    items = client.list_backfills(client.find_pipeline(args.pipeline)["id"], limit=args.limit)
    headers = ["BACKFILL", "STATUS", "OF", "RANGE", "SUCCEEDED", "FAILED", "PENDING", "CREATED"]
    return print_items(args, console, items, headers, _row)


def _row(b: dict[str, Any]) -> list[Any]:
    of = f"schedule {b['schedule_id']}" if b.get("schedule_id") else b["param"]
    return [
        b["id"],
        b["status"],
        of,
        f"{b['from']} .. {b['to']}",
        f"{b['succeeded']}/{b['total']}",
        b["failed"],
        b["pending"],
        b["created_at"],
    ]


def _cancel(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    backfill = client.request("POST", f"/backfills/{args.backfill}/cancel", {})[1]
    if args.json:
        print_json(console, backfill)
    else:
        print(f"canceled: {progress_line(backfill)}")
    return 0


run_backfill = dispatch({"backfill": _create}, "command")
run_backfills = dispatch({"list": _list, "show": _show, "cancel": _cancel}, "backfills_command")
