"""`etl run PIPELINE` (trigger, and follow with `--wait`) and `etl runs
list|show|watch|cancel|resume`: runs through the REST API."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from rich.console import Console

from dag import RunStatus, StepStatus
from service.client import watch
from service.client.checkview import CHECK_HEADERS, check_rows
from service.client.command import (
    EXIT_REFUSED,
    add_json,
    dispatch,
    err_console,
    print_json,
    print_table,
)
from service.client.http import ApiClient, ApiError
from service.client.params import add_param_option, params_text, parse_params

REJECTS_SHOWN = 20  # `etl runs show --rejects` without N
REJECTS_MAX = 500  # the API's page bound
RAW_CHARS = 60


def configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    parser.add_argument("--key", help="trigger key: repeating it returns the same run")
    parser.add_argument("--wait", action="store_true", help="show live progress until the run ends")
    add_param_option(parser)
    add_json(parser)


def run_trigger(args: argparse.Namespace) -> int:
    return dispatch({"run": _trigger}, "command")(args)


def _trigger(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    try:
        params = parse_params(args.param, pipeline.get("plan") or {})
    except ValueError as exc:
        Console(stderr=True).print(f"etl: {exc}", markup=False)
        return 2
    try:
        status, run = client.trigger(pipeline["id"], args.key, params)
    except ApiError as exc:
        if exc.status != 409:
            raise
        # paused, or a revision that no longer validates: refused, nothing recorded
        err_console().print(f"etl: trigger refused ({exc.code}): {exc.message}", markup=False)
        return EXIT_REFUSED
    if status == 429:
        error = run.get("error") or {}
        err_console().print(
            f"etl: trigger refused ({error.get('code')}): {error.get('message')};"
            f" run {run['id']} recorded as skipped",
            markup=False,
        )
        if args.json:
            print_json(console, run)
        return EXIT_REFUSED
    if not args.json:
        what = "existing run for this key" if status == 200 else "triggered"
        print(f"{what}: {watch.run_header(run)} (pipeline {pipeline['name']})")
    if not args.wait:
        if args.json:
            print_json(console, run)
        return 0
    final = _follow(client, run["id"], console, quiet=args.json)
    if args.json:
        print_json(console, final)
    return watch.exit_status(final)


def _follow(client: ApiClient, run_id: str, console: Console, *, quiet: bool) -> dict:
    """Watch a run to its end (silently polling when `quiet`); print a closing line."""
    if quiet:
        return watch.wait(client, run_id)
    run = watch.watch(client, run_id, console)
    took = watch.seconds_between(run.get("started_at"), run.get("finished_at"))
    print(f"run {run['id']} {run['status']}" + (f" in {took:.1f} s" if took is not None else ""))
    return run


def configure_runs(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="runs_command", required=True, metavar="ACTION")
    ls = sub.add_parser("list", help="runs, newest first")
    ls.add_argument("--status", help="only these statuses (comma-separated)")
    ls.add_argument("--pipeline", metavar="PIPELINE", help="only this pipeline (name or id)")
    ls.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    add_json(ls)
    for name, text in (
        ("show", "one run with its steps"),
        ("watch", "live progress until the run ends (exit status: how it ended)"),
        ("cancel", "cancel a queued or running run"),
        ("resume", "resume a failed run"),
        ("rerun", "a new run of the pipeline's current revision with the run's params"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("run", metavar="RUN", help="run id")
        if name == "show":
            p.add_argument(
                "--rejects",
                nargs="?",
                type=int,
                const=REJECTS_SHOWN,
                metavar="N",
                help=f"also the first N rejected rows of each step (default {REJECTS_SHOWN}):"
                " line, column, reason, raw value",
            )
        if name != "watch":
            add_json(p)


def runs_list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline_id = client.pipeline_id_of(args.pipeline) if args.pipeline else None
    items = client.list_runs(status=args.status, pipeline_id=pipeline_id, limit=args.limit)
    if args.json:
        print_json(console, items)
        return 0
    rows = [
        [
            r["id"],
            r.get("pipeline_name"),
            r["status"],
            _counts(r.get("step_counts") or {}, r.get("steps") or 0),
            r.get("trigger_key"),
            r.get("created_at"),
            _run_took(r, client.answered_at),
        ]
        for r in items
    ]
    headers = ["RUN", "PIPELINE", "STATUS", "STEPS", "TRIGGER KEY", "CREATED", "DURATION"]
    print_table(console, headers, rows)
    return 0


def _run_took(run: dict, now: datetime | None) -> str:
    """`4.2 s` for a finished run, `running for 12.0 s` until then (`now`: the server's
    clock), `-` for one that never started."""
    text = watch.took_text(watch.elapsed(run, now), bool(run.get("finished_at")))
    return text.removeprefix("took ")


def _counts(step_counts: dict[str, int], total: int) -> str:
    done = step_counts.get(StepStatus.SUCCEEDED, 0)
    rest = ", ".join(
        f"{n} {s}" for s, n in sorted(step_counts.items()) if s != StepStatus.SUCCEEDED
    )
    return f"{done}/{total} succeeded" + (f" ({rest})" if rest else "")


def runs_show(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    run = client.get_run(args.run)
    if args.rejects is not None and not 1 <= args.rejects <= REJECTS_MAX:
        console.print(f"--rejects: N must be 1..{REJECTS_MAX}", style="red", highlight=False)
        return 2
    rejects = (
        [
            client.step_rejects(run["id"], s["name"], limit=args.rejects)
            for s in run.get("steps", [])
            if s.get("rejected") or s.get("row_errors")
        ]
        if args.rejects
        else []
    )
    if args.json:
        print_json(console, {**run, "rejects": rejects} if args.rejects else run)
        return 0
    now = client.answered_at  # the server's clock when it answered with the run
    watch.print_run(console, run, watch.plan_inputs(client, run), now)
    if params_text(run.get("params") or {}):
        print(f"params: {params_text(run['params'])}")
    checks = check_rows(run)
    if checks:
        print("\nchecks:")
        print_table(console, CHECK_HEADERS, checks)
    if args.rejects:
        _print_rejects(console, rejects)
    return 0


def _print_rejects(console: Console, found: list[dict]) -> None:
    """Each step's first rejected rows under a `step NAME: N rejected` line."""
    if not found:
        print("no step rejected a row")
    for f in found:
        where = f"from {f['path']}" if f["published"] else "kept on the step until it commits"
        print(f"\nstep {f['step']}: {f['rejected']:,} rejected, first {len(f['items'])} ({where})")
        rows = [
            [r["line"], r["column"] or "-", r["reason"], _raw_text(r["raw"])] for r in f["items"]
        ]
        print_table(console, ["LINE", "COLUMN", "REASON", "RAW"], rows)


def _raw_text(raw: Any, limit: int = RAW_CHARS) -> str:
    """A rejected row's raw value on one line, cut to `limit` characters."""
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def runs_watch(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    return watch.exit_status(_follow(client, args.run, console, quiet=False))


def runs_cancel(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    run = client.cancel_run(args.run)
    if args.json:
        print_json(console, run)
    elif run["status"] == RunStatus.CANCELED:
        print(f"canceled: {watch.run_header(run)}")
    else:
        print(f"cancel requested: {watch.run_header(run)} (stops at the next batch)")
    return 0


def runs_resume(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    status, run = client.resume_run(args.run)
    if args.json:
        print_json(console, run)
    if status == 429:
        error = run.get("error") or {}
        err_console().print(
            f"etl: resume refused ({error.get('code')}): {error.get('message')}", markup=False
        )
        return EXIT_REFUSED
    if not args.json:
        print(f"resumed: {watch.run_header(run)}")
    return 0


def runs_rerun(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    status, run = client.request("POST", f"/runs/{args.run}/rerun", {}, accept=(429,))
    if args.json:
        print_json(console, run)
    if status == 429:
        error = run.get("error") or {}
        Console(stderr=True).print(
            f"etl: rerun refused ({error.get('code')}): {error.get('message')}", markup=False
        )
        return EXIT_REFUSED
    if not args.json:
        print(f"rerun: {watch.run_header(run)} (revision {run['revision']})")
    return 0


run_runs = dispatch(
    {
        "list": runs_list,
        "show": runs_show,
        "watch": runs_watch,
        "cancel": runs_cancel,
        "resume": runs_resume,
        "rerun": runs_rerun,
    },
    "runs_command",
)
