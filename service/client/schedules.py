"""`etl schedules list|add|delete`: a pipeline's schedules (on the clock, or on file arrival)
through the REST API."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from service.client.command import add_pipeline_action, dispatch, print_items, print_json
from service.client.http import ApiClient


def configure_schedules(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="schedules_command", required=True, metavar="ACTION")
    add_pipeline_action(sub, "list", "a pipeline's schedules")
    add = add_pipeline_action(sub, "add", "add a schedule (UTC)")
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
    delete = add_pipeline_action(sub, "delete", "delete a schedule", json=False)
    delete.add_argument("schedule", metavar="SCHEDULE", help="schedule id")


def schedules_list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    items = client.list_schedules(client.find_pipeline(args.pipeline)["id"])
    headers = ["SCHEDULE", "WHEN (UTC)", "NEXT FIRE", "LAST FIRED"]
    return print_items(args, console, items, headers, _row)


def _row(s: dict[str, Any]) -> list[Any]:
    return [s["id"], _when(s), _next(s), s.get("last_fired_at") or "-"]


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
