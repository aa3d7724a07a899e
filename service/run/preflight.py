"""What `etl up`, `etl coordinator` and `etl executor` check before they start anything: the
database answers and is migrated, and (`etl up`) the API's address is free. A failure is
one line naming the fix. `etl up` stops at once; a coordinator or executor started on a
database that is not migrated exits with `EXIT_NOT_READY`, which `etl up` takes as final (a
restart cannot migrate a database), while one that cannot reach the database or bind its
port goes on to fail and be restarted as before (PostgreSQL may come back, a port be
freed)."""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import ddl
from service.config import Config

EXIT_NOT_READY = 78  # EX_CONFIG of sysexits.h: a restart cannot help


class NotReady(Exception):
    """The platform cannot start as configured; the message says what to do."""


class NotMigrated(NotReady):
    """The database lacks migrations: final for every process until `etl migrate` runs
    (a database that does not answer may come back; a missing migration never does)."""


def check_database(cfg: Config) -> None:
    """`NotReady` unless the state and sandbox databases answer and are migrated."""
    for url, directory, table in (
        (cfg.database_url, ddl.MIGRATIONS_DIR, "schema_migrations"),
        (cfg.sandbox_url, ddl.SANDBOX_DIR, "sandbox_migrations"),
    ):
        try:
            pending = ddl.pending_migrations(url, directory, table)
        except ddl.DatabaseUnreachable as exc:
            raise NotReady(
                f"cannot connect to the database at {_safe(url)} ({exc}): start PostgreSQL,"
                " or point ETL_DATABASE_URL at it"
            ) from None
        if pending:
            raise NotMigrated(
                f"the database at {_safe(url)} is not migrated ({len(pending)} migrations"
                f" pending, from {pending[0]}): run `etl migrate` first"
            )


def check_api_bind(cfg: Config) -> None:
    """`NotReady` when nothing can listen on `ETL_API_BIND` (another `etl up` holds it)."""
    host, _, port = cfg.api_bind.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn does
            probe.bind((host, int(port)))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise NotReady(
                f"the API address {cfg.api_bind} is already in use (another `etl up` or `etl"
                " coordinator`?): stop that process, or set ETL_API_BIND to a free host:port"
            ) from None
        raise NotReady(f"cannot listen on ETL_API_BIND {cfg.api_bind}: {exc}") from None
    except ValueError:
        raise NotReady(f"ETL_API_BIND {cfg.api_bind!r} is not HOST:PORT") from None


def directories(cfg: Config) -> list[str]:
    """The directories the processes will use, resolved, one line each; a missing data
    directory is said (every file ingest would fail)."""
    lines = []
    for what, var, path in (
        ("data directory (ingest reads here)", "ETL_DATA_DIR", cfg.data_dir),
        ("export directory", "ETL_EXPORT_DIR", cfg.export_dir),
        ("reject directory", "ETL_REJECT_DIR", cfg.reject_dir),
    ):
        line = f"{what}: {Path(path).resolve()} ({var})"
        if var == "ETL_DATA_DIR" and not Path(path).is_dir():
            line += " - does not exist: every file ingest will fail; set ETL_DATA_DIR"
        lines.append(line)
    return lines


def _safe(url: str) -> str:
    """`url` without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
