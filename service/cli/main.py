"""The `etl` console script: ONE command table, and each command's module is imported only
when that command runs, so `etl --help` and the API client commands (`etl runs list`) load
neither the engine nor the database driver. An entrypoint only loads configuration, wires
dependencies and starts or stops things; the work lives in the modules it names."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from service.config import ConfigError


@dataclass(frozen=True)
class Command:
    """One `etl` subcommand: its help line, the module holding it, and the names in that
    module of the function adding its arguments (None: it takes none) and of its handler
    (returns the exit status)."""

    help: str
    module: str
    run: str
    configure: str | None = None


_ADMIN, _SERVE = "service.cli.admin", "service.cli.serve"
COMMANDS: dict[str, Command] = {
    "migrate": Command("apply ddl/ migrations (idempotent)", _ADMIN, "run_migrate"),
    "seed": Command("create the pipeline_admin token", _ADMIN, "run_seed"),
    "token": Command(
        "create (on the server host, or through the API), list, revoke or rotate tokens",
        "service.cli.tokens",
        "run_token",
        "configure_token",
    ),
    "validate": Command(
        "validate a plan offline", "service.cli.plans", "run_validate", "configure_validate"
    ),
    "preview": Command(
        "a plan's effect on its first records",
        "service.cli.preview",
        "run_preview",
        "configure_preview",
    ),
    "api": Command("serve the REST API with gunicorn", _SERVE, "run_api"),
    "coordinator": Command("API + dag-advancer + scheduler + sweep", _SERVE, "run_coordinator"),
    "executor": Command("one executor process", _SERVE, "run_executor", "configure_executor"),
    "up": Command("coordinator and two executors in the foreground", _SERVE, "run_up"),
    "purge": Command(
        "purge intermediate outputs of old finished runs", _SERVE, "run_purge", "configure_purge"
    ),
    "drill": Command("failure drills and the report", _SERVE, "run_drill", "configure_drill"),
    "pipelines": Command(
        "list, show, apply, pause, unpause or delete pipelines (API client)",
        "service.client.pipelines",
        "run_pipelines",
        "configure_pipelines",
    ),
    "run": Command(
        "trigger a run of PIPELINE (API client)",
        "service.client.runs",
        "run_trigger",
        "configure_run",
    ),
    "runs": Command(
        "list, show, watch, cancel or resume runs (API client)",
        "service.client.runs",
        "run_runs",
        "configure_runs",
    ),
    "schedules": Command(
        "list, add or delete schedules (API client)",
        "service.client.schedules",
        "run_schedules",
        "configure_schedules",
    ),
    "cursors": Command(
        "list, set or reset the cursor marks of incremental table ingest (API client)",
        "service.client.cursors",
        "run_cursors",
        "configure_cursors",
    ),
    "webhooks": Command(
        "list, add or delete a pipeline's webhooks (API client, admin)",
        "service.client.webhooks",
        "run_webhooks",
        "configure_webhooks",
    ),
    "backfill": Command(
        "one run of PIPELINE per value of a range or schedule interval (API client)",
        "service.client.backfills",
        "run_backfill",
        "configure_backfill",
    ),
    "backfills": Command(
        "list a pipeline's backfills, show or cancel one (API client)",
        "service.client.backfills",
        "run_backfills",
        "configure_backfills",
    ),
}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The `etl` parser: every command's help line, and the arguments of the command that
    `argv` names (its module is imported for that; the others' are not)."""
    parser = argparse.ArgumentParser(prog="etl", description="local ETL pipeline platform")
    parser.add_argument("--version", action="version", version=f"etl {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, command in COMMANDS.items():
        command_parser = sub.add_parser(name, help=command.help)
        if name == chosen and command.configure is not None:
            getattr(importlib.import_module(command.module), command.configure)(command_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `etl` with `argv` (default: the process arguments); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    command = COMMANDS[args.command]
    try:
        status = getattr(importlib.import_module(command.module), command.run)(args)
        sys.stdout.flush()  # inside the `try`: a reader gone shows here, not at exit
        return status
    except ConfigError as exc:
        print(f"etl: configuration error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader stopped early (`etl runs list | head`): what it read is all it wanted
        _discard_stdout()
        return 0


def _discard_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush of what
    is still buffered does not fail again on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("etl-platform")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
