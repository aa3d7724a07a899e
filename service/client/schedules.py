"""`etl schedules list|add|delete`: a pipeline's schedules through the REST API."""

from __future__ import annotations

import argparse

from rich.console import Console

from service.client.command import add_json, dispatch, print_json, print_table
from service.client.http import ApiClient


def configure_schedules(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="schedules_command", required=True, metavar="ACTION")
    ls = sub.add_parser("list", help="a pipeline's schedules")
    ls.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    add_json(ls)
    add = sub.add_parser("add", help="add a schedule (UTC)")
    add.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    kind = add.add_mutually_exclusive_group(required=True)
    kind.add_argument("--every-minutes", type=int, metavar="N", help="every N minutes, 5..1440")
    kind.add_argument("--daily-at", metavar="HH:MM", help="once a day at HH:MM UTC")
    add.add_argument(
        "--catchup",
        choices=("latest", "all"),
        help="after downtime: one run for the latest missed fire (latest, the default) or"
        " every missed interval through a backfill (all)",
    )
    add_json(add)
    delete = sub.add_parser("delete", help="delete a schedule")
    delete.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    delete.add_argument("schedule", metavar="SCHEDULE", help="schedule id")


def schedules_list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    items = client.list_schedules(client.find_pipeline(args.pipeline)["id"])
    if args.json:
        print_json(console, items)
        return 0
    rows = [
        [
            s["id"],
            f"every {s['every_minutes']} min"
            if s.get("every_minutes")
            else f"daily {s['daily_at']}",
            s.get("next_fire_at"),
            s.get("last_fired_at") or "-",
        ]
        for s in items
    ]
    print_table(console, ["SCHEDULE", "WHEN (UTC)", "NEXT FIRE", "LAST FIRED"], rows)
    return 0


def schedules_add(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    schedule = client.add_schedule(
        pipeline["id"],
        every_minutes=args.every_minutes,
        daily_at=args.daily_at,
        catchup=args.catchup,
    )
    if args.json:
        print_json(console, schedule)
    else:
        print(
            f"added schedule {schedule['id']} to {pipeline['name']};"
            f" next fire {schedule['next_fire_at']}"
        )
    return 0


def schedules_delete(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    client.delete_schedule(pipeline["id"], args.schedule)
    print(f"deleted schedule {args.schedule} of {pipeline['name']}")
    return 0


run_schedules = dispatch(
    {"list": schedules_list, "add": schedules_add, "delete": schedules_delete},
    "schedules_command",
)
