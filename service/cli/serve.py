"""The commands that start the platform's processes: `etl api`, `etl coordinator`, `etl
executor`, `etl up`, and the one-shot `etl purge` and `etl drill`. Each only loads the
configuration and hands over to `service.run`."""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys

import ddl
from service.config import Config
from service.run import coordinator, executor, preflight, purge, supervisor
from service.run.gunicorn import gunicorn_argv


def run_api(args: argparse.Namespace) -> int:
    """Replace this process with gunicorn serving the API (signals reach it directly)."""
    argv = gunicorn_argv(Config.from_env())
    sys.stdout.flush()
    os.execv(argv[0], argv)
    return 1  # not reached


def run_coordinator(args: argparse.Namespace) -> int:
    """API (gunicorn) + dag-advancer worker + scheduler + notifier + sweep, until SIGTERM."""
    cfg = Config.from_env()
    if not _migrated(cfg, "coordinator"):
        return preflight.EXIT_NOT_READY
    return coordinator.run_coordinator(cfg, gunicorn_argv(cfg))


def configure_executor(parser: argparse.ArgumentParser) -> None:
    # The name is the lease identity: a restarted executor takes over its own name's leases
    # at once, so two live executors must never share one. The default is unique per process;
    # a replica names itself after its container's hostname (`executor-{hostname}`).
    parser.add_argument(
        "--name",
        default="executor-{pid}",
        help="executor name, unique among live executors; {hostname} and {pid} are replaced"
        " by this host's name (a container's: its id) and this process's id"
        " (default: executor-{pid})",
    )


def run_executor(args: argparse.Namespace) -> int:
    """One executor process running step attempts, until SIGTERM."""
    try:
        name = executor.executor_name(args.name, socket.gethostname(), os.getpid())
    except ValueError as exc:
        print(f"error: --name: {exc}", file=sys.stderr)
        return 2
    cfg = Config.from_env()
    if not _migrated(cfg, name):
        return preflight.EXIT_NOT_READY
    return executor.run_executor(cfg, name)


def _migrated(cfg: Config, who: str) -> bool:
    """False (after saying why and what to do) when the database is not migrated; a
    database that does not answer is left to the process's own errors and restarts."""
    try:
        preflight.check_database(cfg)
    except preflight.NotMigrated as exc:
        print(f"etl {who}: {exc}", file=sys.stderr, flush=True)
        return False
    except preflight.NotReady:
        pass
    return True


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
        report = purge.purge_runs(cfg, conn, older_than_days=days, limit=None)
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
    """Coordinator + executor-1 + executor-2 in the foreground; restarts dead children.
    Exit 2 at once, with one line naming the fix, when the database does not answer or is
    not migrated, or the API's address is taken."""
    cfg = Config.from_env()
    try:
        preflight.check_database(cfg)
        preflight.check_api_bind(cfg)
    except preflight.NotReady as exc:
        print(f"etl up: {exc}", file=sys.stderr)
        return 2
    return supervisor.run_up(preflight.directories(cfg))
