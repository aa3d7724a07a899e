"""The `etl` console script. An entrypoint only loads configuration, wires dependencies and
starts or stops things; the work lives in the modules it calls.

Subcommands are registered in `SUBCOMMANDS` (name -> `Subcommand`); another module adds its
own by inserting an entry before `main` builds the parser."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import ddl
from dag.plan import parse_plan, topological_order
from service import processes, supervisor
from service.auth import ADMIN, ROLES, chosen_token_problem, generate_token, hash_token
from service.client_cli import COMMANDS as CLIENT_COMMANDS
from service.config import Config, ConfigError
from service.db import Database, execute, fetch_one
from service.plandoc import read_plan_document
from service.preview import configure_preview, run_preview
from service.scheduler import build_scheduler


@dataclass(frozen=True)
class Subcommand:
    """One `etl` subcommand: help text, a function adding its arguments, and its handler
    (returns the exit status)."""

    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


# --- migrate / seed / token ------------------------------------------------------------------


def run_migrate(args: argparse.Namespace) -> int:
    """Apply every pending migration (state, broker, sandbox); idempotent."""
    cfg = Config.from_env()
    names = ddl.migrate(cfg.database_url, cfg.sandbox_url)
    print(f"applied: {', '.join(names)}" if names else "up to date")
    return 0


def run_seed(args: argparse.Namespace) -> int:
    """Create the `pipeline_admin` principal. With ETL_ADMIN_TOKEN that token is used (and
    re-seeding with the same token changes nothing); without it a token is generated and
    printed once, and an existing admin is left alone."""
    cfg = Config.from_env()
    problem = None if cfg.admin_token is None else chosen_token_problem(cfg.admin_token)
    if problem is not None:
        raise ConfigError(f"ETL_ADMIN_TOKEN {problem}; nothing was changed")
    db = Database(cfg.database_url, max_connections=1, application_name="etl-cli")
    try:
        with db.transaction() as cur:
            existing = fetch_one(cur, "find_principal_by_name", {"name": ADMIN})
            if cfg.admin_token is None and existing is not None:
                print(f"{ADMIN} exists; token unchanged (set ETL_ADMIN_TOKEN to replace it)")
                return 0
            token = cfg.admin_token or generate_token()
            hashed = hash_token(token)
            if existing is None:
                params = {"id": str(uuid.uuid4()), "name": ADMIN, "role": ADMIN}
                if fetch_one(cur, "insert_principal", {**params, "token_hash": hashed}) is None:
                    print("error: that token already belongs to another principal", file=sys.stderr)
                    return 1
            elif existing["token_hash"] == hashed and existing["role"] == ADMIN:
                print(f"{ADMIN} already seeded with this token")
                return 0
            else:
                params = {"name": ADMIN, "role": ADMIN, "token_hash": hashed}
                execute(cur, "update_principal_token", params)
    finally:
        db.close()
    if cfg.admin_token is None:
        print(f"{ADMIN} token (shown once): {token}")
    else:
        print(f"{ADMIN} seeded from ETL_ADMIN_TOKEN")
    return 0


def configure_token(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="token_command", required=True)
    create = sub.add_parser("create", help="create a principal and print its new token")
    create.add_argument("--role", required=True, choices=ROLES)
    create.add_argument("--name", required=True)


def run_token(args: argparse.Namespace) -> int:
    """`etl token create`: a new principal with a generated token, printed once."""
    cfg = Config.from_env()
    token = generate_token()
    params = {"id": str(uuid.uuid4()), "name": args.name, "role": args.role}
    db = Database(cfg.database_url, max_connections=1, application_name="etl-cli")
    try:
        with db.transaction() as cur:
            row = fetch_one(cur, "insert_principal", {**params, "token_hash": hash_token(token)})
    finally:
        db.close()
    if row is None:
        print(f"error: a principal named {args.name!r} exists", file=sys.stderr)
        return 1
    print(token)
    return 0


# --- validate --------------------------------------------------------------------------------


def configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PLAN.json", type=Path)


def run_validate(args: argparse.Namespace) -> int:
    """Validate a plan offline: a `{"name", "plan"}` document or a bare plan object. Exit 0
    with `ok: N steps: a -> b -> c` (execution order), or 1 with one `field: message` line
    per problem."""
    doc = read_plan_document(args.path)
    if doc.unreadable is not None:
        print(f"{args.path}: {doc.unreadable}", file=sys.stderr)
        return 1
    if doc.problems:
        for field, message in doc.problems:
            print(f"{field}: {message}")
        return 1
    order = topological_order(parse_plan(doc.plan))
    print(f"ok: {len(order)} steps: {' -> '.join(order)}")
    return 0


# --- api -------------------------------------------------------------------------------------


# Slow clients: gunicorn's sync workers give a whole process to one connection until its
# headers are in, so two clients trickling headers took the API down. gthread workers park an
# idle connection in the poller, and a client that trickles bytes holds one thread, not the
# process: API_THREADS per worker is the number of such clients a worker absorbs while it
# still answers at once (docs/decisions.md, "Slow clients").
API_THREADS = 64
API_KEEPALIVE_S = 5  # an idle kept-alive connection is closed after this
API_LIMIT_REQUEST_LINE = 4094  # bytes of method + path + query
API_LIMIT_REQUEST_FIELDS = 50  # header lines
API_LIMIT_REQUEST_FIELD_SIZE = 8190  # bytes per header line


def gunicorn_argv(cfg: Config) -> list[str]:
    """The gunicorn command serving the API on `cfg.api_bind` with `cfg.api_workers`
    threaded workers and bounded request lines and headers."""
    local = Path(sys.executable).with_name("gunicorn")
    exe = [str(local)] if local.exists() else [shutil.which("gunicorn") or "gunicorn"]
    return [
        *exe,
        "--workers",
        str(cfg.api_workers),
        "--worker-class",
        "gthread",
        "--threads",
        str(API_THREADS),
        "--keep-alive",
        str(API_KEEPALIVE_S),
        "--timeout",
        "30",
        "--limit-request-line",
        str(API_LIMIT_REQUEST_LINE),
        "--limit-request-fields",
        str(API_LIMIT_REQUEST_FIELDS),
        "--limit-request-field_size",
        str(API_LIMIT_REQUEST_FIELD_SIZE),
        "--bind",
        cfg.api_bind,
        "--no-control-socket",  # gunicorn 27 would share ~/.gunicorn/gunicorn.ctl otherwise
        "--config",
        "python:service.gunicorn_conf",  # JSON logs
        "--graceful-timeout",
        "10",
        "--log-level",
        cfg.log_level.lower(),
        "service.app:get_app()",
    ]


def run_api(args: argparse.Namespace) -> int:
    """Replace this process with gunicorn serving the API (signals reach it directly)."""
    argv = gunicorn_argv(Config.from_env())
    sys.stdout.flush()
    os.execv(argv[0], argv)
    return 1  # not reached


SUBCOMMANDS: dict[str, Subcommand] = {
    "migrate": Subcommand("apply ddl/ migrations (idempotent)", _no_arguments, run_migrate),
    "seed": Subcommand("create the pipeline_admin token", _no_arguments, run_seed),
    "token": Subcommand("manage principals and tokens", configure_token, run_token),
    "validate": Subcommand("validate a plan offline", configure_validate, run_validate),
    "preview": Subcommand("a plan's effect on its first records", configure_preview, run_preview),
    "api": Subcommand("serve the REST API with gunicorn", _no_arguments, run_api),
}


# --- processes -------------------------------------------------------------------------------


def run_coordinator(args: argparse.Namespace) -> int:
    """API (gunicorn) + dag-advancer worker + scheduler + sweep, until SIGTERM."""
    cfg = Config.from_env()
    return processes.run_coordinator(cfg, gunicorn_argv(cfg), scheduler_factory=build_scheduler)


def configure_executor(parser: argparse.ArgumentParser) -> None:
    # The name is the lease identity: a restarted executor takes over its own name's leases
    # at once, so two live executors must never share one. The default is unique per process.
    parser.add_argument(
        "--name",
        default=f"executor-{os.getpid()}",
        help="executor name, unique among live executors (default: executor-<pid>)",
    )


def run_executor(args: argparse.Namespace) -> int:
    """One executor process running step attempts, until SIGTERM."""
    return processes.run_executor(Config.from_env(), args.name)


def configure_purge(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--older-than-days",
        type=float,
        default=None,
        metavar="DAYS",
        help="purge runs that finished at least DAYS ago (default: ETL_RETENTION_DAYS, 7);"
        " 0 purges every finished run",
    )


def run_purge(args: argparse.Namespace) -> int:
    """Purge the intermediate outputs of finished runs (see actors/purge.py) now."""
    cfg = Config.from_env()
    days = cfg.retention_days if args.older_than_days is None else args.older_than_days
    if not 0 <= days < math.inf:  # also refuses nan
        print("error: --older-than-days must be a finite number >= 0", file=sys.stderr)
        return 2
    conn = ddl.connect(cfg.database_url, "etl-purge")
    try:
        report = processes.purge_runs(cfg, conn, older_than_days=days, limit=None)
    finally:
        conn.close()
    print(
        f"purged {len(report.runs)} run(s) finished at least {days:g} day(s) ago:"
        f" {report.batches} output batch(es), {report.staging_tables} staging table(s),"
        f" {report.stages} chunk folder(s)"
    )
    return 0


def configure_drill(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "args", nargs=argparse.REMAINDER, help="NAME [options]: see `etl drill -- --help`"
    )


def run_drill(args: argparse.Namespace) -> int:
    """Hand over to `python -m drills.scenarios`: the drills drive the platform from outside
    (they sit above `service`), so the CLI starts them instead of importing them."""
    rest = [a for a in args.args if a != "--"] or ["--help"]
    argv = [sys.executable, "-m", "drills.scenarios", *rest]
    os.execv(sys.executable, argv)
    return 0  # not reached


def run_up(args: argparse.Namespace) -> int:
    """Coordinator + executor-1 + executor-2 in the foreground; restarts dead children."""
    return supervisor.run_up()


SUBCOMMANDS.update(
    {
        "coordinator": Subcommand(
            "API + dag-advancer + scheduler + sweep", _no_arguments, run_coordinator
        ),
        "executor": Subcommand("one executor process", configure_executor, run_executor),
        "up": Subcommand("coordinator and two executors in the foreground", _no_arguments, run_up),
        "purge": Subcommand(
            "purge intermediate outputs of old finished runs", configure_purge, run_purge
        ),
        "drill": Subcommand("failure drills and the report", configure_drill, run_drill),
    }
)


SUBCOMMANDS.update({name: Subcommand(*entry) for name, entry in CLIENT_COMMANDS.items()})


def build_parser() -> argparse.ArgumentParser:
    """The `etl` parser with every registered subcommand."""
    parser = argparse.ArgumentParser(prog="etl", description="local ETL pipeline platform")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in SUBCOMMANDS.items():
        command.configure(sub.add_parser(name, help=command.help))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `etl` with `argv` (default: the process arguments); returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return SUBCOMMANDS[args.command].run(args)
    except ConfigError as exc:
        print(f"etl: configuration error: {exc}", file=sys.stderr)
        return 2
