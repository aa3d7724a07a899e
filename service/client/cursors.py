"""`etl cursors list|set|reset`: the cursor marks of a pipeline's incremental table
ingests through the REST API (setting and resetting are an admin's)."""

from __future__ import annotations

import argparse

from rich.console import Console

from service.client.command import add_json, dispatch, print_json, print_table
from service.client.http import ApiClient


def configure_cursors(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="cursors_command", required=True, metavar="ACTION")
    ls = sub.add_parser("list", help="a pipeline's cursor ingests and their marks")
    ls.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    add_json(ls)
    put = sub.add_parser("set", help="set a step's mark: the next run reads the rows above it")
    put.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    put.add_argument("step", metavar="STEP", help="the cursor ingest step")
    put.add_argument("value", metavar="VALUE", help="a value of the cursor column's type")
    add_json(put)
    reset = sub.add_parser("reset", help="reset marks: the next run reads from the start")
    reset.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    which = reset.add_mutually_exclusive_group(required=True)
    which.add_argument("--step", metavar="STEP", help="the cursor ingest step")
    which.add_argument("--all", action="store_true", help="every mark of the pipeline")


def cursors_list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    items = client.list_cursors(client.find_pipeline(args.pipeline)["id"])
    if args.json:
        print_json(console, items)
        return 0
    rows = [
        [
            c["step"],
            f"{c['table']}.{c['column']}",
            "-" if c["value"] is None else c["value"],
            c.get("updated_by") or "-",
            c.get("updated_at") or "-",
        ]
        for c in items
    ]
    print_table(console, ["STEP", "CURSOR", "MARK", "SET BY", "SET AT"], rows)
    return 0


def cursors_set(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    cursor = client.set_cursor(pipeline["id"], args.step, args.value)
    if args.json:
        print_json(console, cursor)
    else:
        print(f"set the mark of {pipeline['name']}/{args.step} to {cursor['value']}")
    return 0


def cursors_reset(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    client.reset_cursors(pipeline["id"], None if args.all else args.step)
    which = "every mark" if args.all else f"the mark of {args.step}"
    print(f"reset {which} of {pipeline['name']}: the next run reads from the start")
    return 0


run_cursors = dispatch(
    {"list": cursors_list, "set": cursors_set, "reset": cursors_reset}, "cursors_command"
)
