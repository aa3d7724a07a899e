"""`etl pipelines list|show|apply|pause|unpause|delete`: pipelines through the REST API."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from service.client.command import (
    UsageError,
    add_json,
    add_pipeline_action,
    dispatch,
    print_items,
    print_json,
    print_table,
)
from service.client.http import ApiClient


def configure_pipelines(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="pipelines_command", required=True, metavar="ACTION")
    ls = sub.add_parser("list", help="pipelines, newest first")
    ls.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    add_json(ls)
    add_pipeline_action(sub, "show", "one pipeline and its current plan")
    apply = sub.add_parser(
        "apply", help="create a pipeline from FILE, or add a revision if its plan changed"
    )
    apply.add_argument("file", metavar="FILE", type=Path, help='a {"name", "plan"} JSON file')
    add_json(apply)
    for action, text in (
        ("pause", "admit no run until unpaused"),
        ("unpause", "admit runs again"),
        ("delete", "delete (refused while runs are queued or running; its runs stay readable)"),
    ):
        add_pipeline_action(sub, action, text, json=False)


def pipelines_list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    headers = ["NAME", "REV", "STEPS", "LAST RUN", "STATE", "NEXT FIRE", "ID"]
    return print_items(args, console, client.list_pipelines(limit=args.limit), headers, _row)


def _row(p: dict[str, Any]) -> list[Any]:
    return [
        p["name"],
        p["revision"],
        p.get("steps"),
        (p.get("last_run") or {}).get("status", "-"),
        "paused" if p.get("paused") else "active",
        # a paused pipeline's schedules make no run: no next fire to show
        "-" if p.get("paused") else p.get("next_fire_at") or "-",
        p["id"],
    ]


def pipelines_show(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    if args.json:
        print_json(console, pipeline)
        return 0
    plan = pipeline.get("plan") or {}
    print(f"pipeline {pipeline['name']} ({pipeline['id']}) revision {pipeline['revision']}")
    if pipeline.get("paused"):
        print(
            "paused: triggers are refused and schedules make no run until"
            f" `etl pipelines unpause {pipeline['name']}`"
        )
    print(
        f"on_failure {plan.get('on_failure', 'stop_dependents')}"
        f"  on_row_error {plan.get('on_row_error', 'stop')}"
    )
    rows = [
        [
            s.get("name"),
            s.get("type"),
            ", ".join(s.get("depends_on") or []) or "-",
            _step_summary(s.get("config") or {}),
        ]
        for s in plan.get("steps") or []
    ]
    print_table(console, ["STEP", "TYPE", "DEPENDS ON", "CONFIG"], rows)
    return 0


def _step_summary(config: dict) -> str:
    if "op" in config:
        return f"op {config['op']}"
    if "source" in config:
        return f"{config['source']} {config.get('path') or config.get('table') or ''}".strip()
    if "target" in config:
        return f"{config['target']} {config.get('path') or config.get('table') or ''}".strip()
    return "-"


def _read_document(path: Path) -> tuple[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or "plan" not in doc:
        raise UsageError(f'{path}: expected a JSON object {{"name": ..., "plan": {{...}}}}')
    return doc["name"], doc["plan"]


def pipelines_pause(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    return _set_paused(args, client, paused=True)


def pipelines_unpause(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    return _set_paused(args, client, paused=False)


def _set_paused(args: argparse.Namespace, client: ApiClient, *, paused: bool) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    after = client.set_paused(pipeline["id"], paused)
    print(f"{after['name']} is {'paused' if after['paused'] else 'not paused'}")
    return 0


def pipelines_delete(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    client.delete_pipeline(pipeline["id"])
    print(
        f"deleted pipeline {pipeline['name']} ({pipeline['id']}); its runs stay readable"
        f" (etl runs list --pipeline {pipeline['id']})"
    )
    return 0


def pipelines_apply(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    """Create the pipeline named in FILE, or PATCH a new revision when its plan differs
    from the current one (If-Match: the revision compared against); say which."""
    name, plan = _read_document(args.file)
    _, page = client.request("GET", "/pipelines", params={"name": name, "limit": 1})
    if not page["items"]:
        pipeline, outcome = client.create_pipeline(name, plan), "created"
        message = f"created pipeline {name} ({pipeline['id']}) at revision 1"
    else:
        current = client.get_pipeline(page["items"][0]["id"])
        if current["plan"] == plan:
            pipeline, outcome = current, "unchanged"
            message = f"unchanged: pipeline {name} stays at revision {current['revision']}"
        else:
            pipeline = client.update_plan(current["id"], plan, revision=current["revision"])
            outcome = "updated"
            message = (
                f"updated pipeline {name} ({pipeline['id']}):"
                f" revision {current['revision']} -> {pipeline['revision']}"
            )
    if args.json:
        print_json(console, {"outcome": outcome, "pipeline": pipeline})
    else:
        print(message)
    return 0


run_pipelines = dispatch(
    {
        "list": pipelines_list,
        "show": pipelines_show,
        "apply": pipelines_apply,
        "pause": pipelines_pause,
        "unpause": pipelines_unpause,
        "delete": pipelines_delete,
    },
    "pipelines_command",
)
