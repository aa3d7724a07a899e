"""`etl schedules list|add|delete`: a pipeline's schedules (on the clock, or on file arrival)
through the REST API."""

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
    kind.add_argument(
        "--watch",
        metavar="GLOB",
        help="one run per new file matching GLOB under ETL_DATA_DIR (params.file)",
    )
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
    rows = [[s["id"], _when(s), _next(s), s.get("last_fired_at") or "-"] for s in items]
    print_table(console, ["SCHEDULE", "WHEN (UTC)", "NEXT FIRE", "LAST FIRED"], rows)
    return 0


def _when(schedule: dict) -> str:
    if schedule.get("watch"):
        return f"files {schedule['watch']}"
    if schedule.get("every_minutes"):
        return f"every {schedule['every_minutes']} min"
    return f"daily {schedule['daily_at']}"


def _next(schedule: dict) -> str:
    """The next fire; for a watch schedule, its files waiting for room."""
    if schedule.get("watch"):
        return f"on arrival ({schedule.get('files_pending', 0)} waiting)"
    return schedule.get("next_fire_at") or "-"


def schedules_add(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    schedule = client.add_schedule(
        pipeline["id"],
        every_minutes=args.every_minutes,
        daily_at=args.daily_at,
        watch=args.watch,
        catchup=args.catchup,
    )
    if args.json:
        print_json(console, schedule)
    elif schedule.get("watch"):
        print(
            f"added schedule {schedule['id']} to {pipeline['name']}: one run per new file"
            f" matching {schedule['watch']}"
        )
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
