"""What every `etl` API client command shares: its client, its output (`--json` prints the
API's JSON instead of text) and its exit statuses. The commands, one module per group:
`pipelines` (service/client/pipelines.py), `run` and `runs` (runs.py), `schedules`
(schedules.py), `token` (tokens.py). They read `ETL_API_URL` and `ETL_TOKEN`
(service/config.py).

Exit statuses (also in docs/cli.md): 0 success (a waited-for run succeeded); 1 the run failed;
2 usage or configuration error (e.g. no ETL_TOKEN); 3 the run was canceled; 4 the trigger or
resume was refused, or the run was skipped; 5 the API answered with an error; 6 the API
could not be reached; 130 interrupted while watching (the run goes on)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from rich.console import Console
from rich.table import Table

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


def api_client(cfg: Config) -> ApiClient:
    if not cfg.token:
        raise UsageError(
            "ETL_TOKEN is not set: export a token of this API (e.g. the pipeline_admin token"
            " from `etl seed`, or one from `etl token create --role pipeline_viewer --name N`)"
        )
    url = urlsplit(cfg.api_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise UsageError(
            f"ETL_API_URL {cfg.api_url!r} is not an http:// or https:// URL with a host"
            " (e.g. http://127.0.0.1:8080)"
        )
    return ApiClient(cfg.api_url, cfg.token)


class _Console(Console):
    """rich's console, but a reader gone (`etl runs list | head`) raises BrokenPipeError,
    which `etl` ends quietly with exit status 0 (rich's own way exits with 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def new_console(**options: Any) -> Console:
    """Standard output (or `file=`): lines as long as their text unless `options` say
    otherwise."""
    return _Console(**{"soft_wrap": True, "highlight": False, **options})


def err_console() -> Console:
    """Standard error: lines as long as their text (never wrapped at 80 columns when it
    is a pipe or a file)."""
    return Console(stderr=True, soft_wrap=True, highlight=False)


def dispatch(handlers: dict[str, Handler], attr: str) -> Callable[[argparse.Namespace], int]:
    """A command's `run` calling `handlers[args.<attr>]` with a client and a console, and
    turning client errors into messages and exit statuses."""

    def run(args: argparse.Namespace) -> int:
        err = err_console()
        try:
            client = api_client(Config.from_env())
            return handlers[getattr(args, attr)](args, client, new_console())
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


def print_json(console: Console, value: Any) -> None:
    console.print_json(json.dumps(value)) if console.is_terminal else print(json.dumps(value))


def print_table(console: Console, headers: list[str], rows: list[list[Any]]) -> None:
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


def print_items(
    args: argparse.Namespace,
    console: Console,
    items: list[dict[str, Any]],
    headers: list[str],
    row: Callable[[dict[str, Any]], list[Any]],
) -> int:
    """A list command's answer: the API's JSON with `--json`, else a table of one `row(item)`
    per item under `headers`; 0."""
    if args.json:
        print_json(console, items)
    else:
        print_table(console, headers, [row(item) for item in items])
    return 0


def add_pipeline_action(
    sub: Any, action: str, text: str, *, json: bool = True
) -> argparse.ArgumentParser:
    """The parser of `etl GROUP ACTION PIPELINE` (an action on one pipeline's things: its
    PIPELINE argument and, with `json`, `--json`), for `sub` (a group's subparsers)."""
    parser = sub.add_parser(action, help=text)
    parser.add_argument("pipeline", metavar="PIPELINE", help="name or id")
    if json:
        add_json(parser)
    return parser


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
