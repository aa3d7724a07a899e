"""The `etl` commands that drive a running coordinator through its REST API, like any other
client: `pipelines list|show|apply|pause|unpause|delete`, `run`,
`runs list|show|watch|cancel|resume`, `schedules list|add|delete`,
`token create|list|revoke|rotate`. They read `ETL_API_URL` and `ETL_TOKEN`
(service/config.py); `--json` on every read prints the API's JSON instead of text.

Exit statuses (also in README.md): 0 success (a waited-for run succeeded); 1 the run failed;
2 usage or configuration error (e.g. no ETL_TOKEN); 3 the run was canceled; 4 the trigger or
resume was refused, or the run was skipped; 5 the API answered with an error; 6 the API
could not be reached; 130 interrupted while watching (the run goes on)."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from dag import RunStatus, StepStatus
from service.client import watch
from service.client.checkview import CHECK_HEADERS, check_rows
from service.client.http import ApiClient, ApiError, ApiUnreachable
from service.config import Config

EXIT_USAGE = 2
EXIT_REFUSED = 4
EXIT_API_ERROR = 5
EXIT_UNREACHABLE = 6
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A command cannot start (missing token, unreadable file); exit status 2."""


Handler = Callable[[argparse.Namespace, ApiClient, Console], int]


REJECTS_SHOWN = 20  # `etl runs show --rejects` without N
REJECTS_MAX = 500  # the API's page bound
RAW_CHARS = 60


def _client(cfg: Config) -> ApiClient:
    if not cfg.token:
        raise UsageError(
            "ETL_TOKEN is not set: export a token of this API (e.g. the pipeline_admin token"
            " from `etl seed`, or one from `etl token create --role pipeline_viewer --name N`)"
        )
    return ApiClient(cfg.api_url, cfg.token)


def _console() -> Console:
    return Console(soft_wrap=True, highlight=False)


def _dispatch(handlers: dict[str, Handler], attr: str) -> Callable[[argparse.Namespace], int]:
    """A command's `run` calling `handlers[args.<attr>]` with a client and a console, and
    turning client errors into messages and exit statuses."""

    def run(args: argparse.Namespace) -> int:
        err = Console(stderr=True, soft_wrap=True, highlight=False)
        try:
            client = _client(Config.from_env())
            return handlers[getattr(args, attr)](args, client, _console())
        except UsageError as exc:
            err.print(f"etl: {exc}", markup=False)
            return EXIT_USAGE
        except ApiUnreachable as exc:
            err.print(f"etl: {exc} (is the coordinator running? see ETL_API_URL)", markup=False)
            return EXIT_UNREACHABLE
        except ApiError as exc:
            err.print(f"etl: API error {exc.status} {exc.code}: {exc.message}", markup=False)
            for d in exc.details:
                err.print(f"  {d.get('field', '')}: {d.get('message', '')}", markup=False)
            return EXIT_API_ERROR
        except KeyboardInterrupt:
            err.print("etl: interrupted (the run goes on)")
            return EXIT_INTERRUPTED

    return run


def _print_json(console: Console, value: Any) -> None:
    console.print_json(json.dumps(value)) if console.is_terminal else print(json.dumps(value))


def _print_table(console: Console, headers: list[str], rows: list[list[Any]]) -> None:
    """A table: rich's on a terminal, space-aligned plain columns otherwise."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    if console.is_terminal:
        t = Table(*headers)
        for row in cells:
            t.add_row(*row)
        console.print(t)
        return
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    for row in [headers, *cells]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def _add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the API's JSON")


# --- pipelines -------------------------------------------------------------------------------


def configure_pipelines(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="pipelines_command", required=True, metavar="ACTION")
    ls = sub.add_parser("list", help="pipelines, newest first")
    ls.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    _add_json(ls)
    show = sub.add_parser("show", help="one pipeline and its current plan")
    show.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    _add_json(show)
    apply = sub.add_parser(
        "apply", help="create a pipeline from FILE, or add a revision if its plan changed"
    )
    apply.add_argument("file", metavar="FILE", type=Path, help='a {"name", "plan"} JSON file')
    _add_json(apply)
    for action, text in (
        ("pause", "admit no run until unpaused"),
        ("unpause", "admit runs again"),
        ("delete", "delete (refused while runs are queued or running; its runs stay readable)"),
    ):
        paused = sub.add_parser(action, help=text)
        paused.add_argument("pipeline", metavar="PIPELINE", help="name or id")


def pipelines_list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    items = client.list_pipelines(limit=args.limit)
    if args.json:
        _print_json(console, items)
        return 0
    rows = [
        [
            p["name"],
            p["revision"],
            p.get("steps"),
            (p.get("last_run") or {}).get("status", "-"),
            p.get("next_fire_at") or "-",
            p["id"],
        ]
        for p in items
    ]
    _print_table(console, ["NAME", "REV", "STEPS", "LAST RUN", "NEXT FIRE", "ID"], rows)
    return 0


def pipelines_show(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    if args.json:
        _print_json(console, pipeline)
        return 0
    plan = pipeline.get("plan") or {}
    print(f"pipeline {pipeline['name']} ({pipeline['id']}) revision {pipeline['revision']}")
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
    _print_table(console, ["STEP", "TYPE", "DEPENDS ON", "CONFIG"], rows)
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
        _print_json(console, {"outcome": outcome, "pipeline": pipeline})
    else:
        print(message)
    return 0


# --- run / runs ------------------------------------------------------------------------------


def configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    parser.add_argument("--key", help="trigger key: repeating it returns the same run")
    parser.add_argument("--wait", action="store_true", help="show live progress until the run ends")
    _add_json(parser)


def run_trigger(args: argparse.Namespace) -> int:
    return _dispatch({"run": _trigger}, "command")(args)


def _trigger(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    try:
        status, run = client.trigger(pipeline["id"], args.key)
    except ApiError as exc:
        if exc.status != 409:
            raise
        # paused, or a revision that no longer validates: refused, nothing recorded
        Console(stderr=True).print(
            f"etl: trigger refused ({exc.code}): {exc.message}", markup=False
        )
        return EXIT_REFUSED
    if status == 429:
        error = run.get("error") or {}
        Console(stderr=True).print(
            f"etl: trigger refused ({error.get('code')}): {error.get('message')};"
            f" run {run['id']} recorded as skipped",
            markup=False,
        )
        if args.json:
            _print_json(console, run)
        return EXIT_REFUSED
    if not args.json:
        what = "existing run for this key" if status == 200 else "triggered"
        print(f"{what}: {watch.run_header(run)} (pipeline {pipeline['name']})")
    if not args.wait:
        if args.json:
            _print_json(console, run)
        return 0
    final = _follow(client, run["id"], console, quiet=args.json)
    if args.json:
        _print_json(console, final)
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
    _add_json(ls)
    for name, text in (
        ("show", "one run with its steps"),
        ("watch", "live progress until the run ends (exit status: how it ended)"),
        ("cancel", "cancel a queued or running run"),
        ("resume", "resume a failed run"),
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
            _add_json(p)


def runs_list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline_id = client.pipeline_id_of(args.pipeline) if args.pipeline else None
    items = client.list_runs(status=args.status, pipeline_id=pipeline_id, limit=args.limit)
    if args.json:
        _print_json(console, items)
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
    _print_table(console, headers, rows)
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
        _print_json(console, {**run, "rejects": rejects} if args.rejects else run)
        return 0
    now = client.answered_at  # the server's clock when it answered with the run
    watch.print_run(console, run, watch.plan_inputs(client, run), now)
    checks = check_rows(run)
    if checks:
        print("\nchecks:")
        _print_table(console, CHECK_HEADERS, checks)
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
        _print_table(console, ["LINE", "COLUMN", "REASON", "RAW"], rows)


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
        _print_json(console, run)
    elif run["status"] == RunStatus.CANCELED:
        print(f"canceled: {watch.run_header(run)}")
    else:
        print(f"cancel requested: {watch.run_header(run)} (stops at the next batch)")
    return 0


def runs_resume(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    status, run = client.resume_run(args.run)
    if args.json:
        _print_json(console, run)
    if status == 429:
        error = run.get("error") or {}
        Console(stderr=True).print(
            f"etl: resume refused ({error.get('code')}): {error.get('message')}", markup=False
        )
        return EXIT_REFUSED
    if not args.json:
        print(f"resumed: {watch.run_header(run)}")
    return 0


# --- schedules -------------------------------------------------------------------------------


def configure_schedules(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="schedules_command", required=True, metavar="ACTION")
    ls = sub.add_parser("list", help="a pipeline's schedules")
    ls.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    _add_json(ls)
    add = sub.add_parser("add", help="add a schedule (UTC)")
    add.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    kind = add.add_mutually_exclusive_group(required=True)
    kind.add_argument("--every-minutes", type=int, metavar="N", help="every N minutes, 5..1440")
    kind.add_argument("--daily-at", metavar="HH:MM", help="once a day at HH:MM UTC")
    _add_json(add)
    delete = sub.add_parser("delete", help="delete a schedule")
    delete.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    delete.add_argument("schedule", metavar="SCHEDULE", help="schedule id")


def schedules_list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    items = client.list_schedules(client.find_pipeline(args.pipeline)["id"])
    if args.json:
        _print_json(console, items)
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
    _print_table(console, ["SCHEDULE", "WHEN (UTC)", "NEXT FIRE", "LAST FIRED"], rows)
    return 0


def schedules_add(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    pipeline = client.find_pipeline(args.pipeline)
    schedule = client.add_schedule(
        pipeline["id"], every_minutes=args.every_minutes, daily_at=args.daily_at
    )
    if args.json:
        _print_json(console, schedule)
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


# --- tokens ----------------------------------------------------------------------------------

_DURATION = re.compile(r"(\d{1,10})([smhd]?)")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration_s(text: str) -> int:
    """`--expires-in`: seconds from `3600`, `3600s`, `90m`, `12h` or `30d`."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or int(match[1]) == 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration such as 3600s, 90m, 12h or 30d"
        )
    return int(match[1]) * _UNIT_S[match[2]]


def configure_token(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = sub.add_parser("create", help="a new token; prints its secret once")
    create.add_argument("--name", required=True, help="unique among live tokens")
    create.add_argument(
        "--role", required=True, help="pipeline_admin, pipeline_operator or pipeline_viewer"
    )
    create.add_argument(
        "--expires-in", type=parse_duration_s, metavar="DURATION", help="e.g. 3600s, 12h, 30d"
    )
    _add_json(create)
    ls = sub.add_parser("list", help="tokens, newest first, revoked ones too (never a secret)")
    _add_json(ls)
    revoke = sub.add_parser("revoke", help="revoke: its API calls and console sessions end at once")
    revoke.add_argument("token", metavar="TOKEN", help="token id, or the name of a live one")
    rotate = sub.add_parser(
        "rotate", help="a new secret for the same token (printed once); the old one ends at once"
    )
    rotate.add_argument("token", metavar="TOKEN", help="token id, or the name of a live one")
    rotate.add_argument(
        "--expires-in",
        type=parse_duration_s,
        metavar="DURATION",
        help="a new lifetime from now (default: the expiry stays)",
    )
    _add_json(rotate)


def _print_issued(args: argparse.Namespace, console: Console, issued: dict, what: str) -> None:
    """The secret alone on stdout (for a script to capture), what it is on stderr."""
    if args.json:
        _print_json(console, issued)
        return
    expires = issued.get("expires_at") or "never"
    Console(stderr=True, highlight=False).print(
        f"{what} token {issued['name']} ({issued['id']}), role {issued['role']},"
        f" expires {expires}; the secret below is shown this once:",
        markup=False,
    )
    print(issued["token"])


def token_create(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    issued = client.create_token(args.name, args.role, args.expires_in)
    _print_issued(args, console, issued, "created")
    return 0


def token_list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    items = client.list_tokens()
    if args.json:
        _print_json(console, items)
        return 0
    rows = [
        [
            t["id"],
            t["name"],
            t["role"],
            t["created_at"],
            t.get("last_used_at") or "-",
            t.get("expires_at") or "never",
            t.get("revoked_at") or "-",
        ]
        for t in items
    ]
    headers = ["ID", "NAME", "ROLE", "CREATED", "LAST USED", "EXPIRES", "REVOKED"]
    _print_table(console, headers, rows)
    return 0


def token_revoke(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    token = client.find_token(args.token)
    client.revoke_token(token["id"])
    print(f"revoked token {token['name']} ({token['id']})")
    return 0


def token_rotate(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    token = client.find_token(args.token)
    issued = client.rotate_token(token["id"], args.expires_in)
    _print_issued(args, console, issued, "rotated")
    return 0


# The handlers of each command group; `service.cli.main.COMMANDS` names them.
run_pipelines = _dispatch(
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
run_runs = _dispatch(
    {
        "list": runs_list,
        "show": runs_show,
        "watch": runs_watch,
        "cancel": runs_cancel,
        "resume": runs_resume,
    },
    "runs_command",
)
run_schedules = _dispatch(
    {"list": schedules_list, "add": schedules_add, "delete": schedules_delete},
    "schedules_command",
)
run_token = _dispatch(
    {"create": token_create, "list": token_list, "revoke": token_revoke, "rotate": token_rotate},
    "token_command",
)
