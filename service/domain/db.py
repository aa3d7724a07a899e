"""The coordinator's database access: a small pool of kept sessions, one-transaction blocks, and
the named queries of `service/domain/sql/queries.sql` (loaded once, called by name). Only
`service.domain` runs SQL; the faces (API, console, CLI) call its functions."""

from __future__ import annotations

import logging
import select
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg2
import psycopg2.extensions
import psycopg2.extras

from ddl import Cursor, connection_kwargs, one_transaction
from service.domain.sql import QUERIES
from service.errors import DatabaseUnavailable

log = logging.getLogger(__name__)


def execute(cur: Cursor, name: str, params: Mapping[str, Any] | None = None) -> Cursor:
    """Run the named query `name` with `params` on `cur`; returns `cur` for fetching."""
    cur.execute(QUERIES[name], params or {})
    return cur


def fetch_one(cur: Cursor, name: str, params: Mapping[str, Any] | None = None) -> dict | None:
    """The first row of the named query, or None."""
    row = execute(cur, name, params).fetchone()
    return dict(row) if row is not None else None


def fetch_all(cur: Cursor, name: str, params: Mapping[str, Any] | None = None) -> list[dict]:
    """Every row of the named query."""
    return [dict(r) for r in execute(cur, name, params).fetchall()]


class Database:
    """A lazily filled, thread-safe pool of up to `max_connections` sessions to `url`.

    Sessions are opened on first need (so a gunicorn worker opens its own after the fork)
    and kept between transactions: opening one costs PostgreSQL a backend process and an
    authentication, a dozen times a short transaction. A pooled session the server ended
    meanwhile (restart, `pg_terminate_backend`, an idle timeout) is seen before it is handed
    out and replaced. Sessions run in UTC so timestamps come back as UTC-aware datetimes."""

    def __init__(
        self,
        url: str,
        *,
        max_connections: int = 4,
        application_name: str = "etl-api",
        wait_s: float = 10.0,
    ):
        self.url = url
        self.max_connections = max_connections
        self.application_name = application_name
        self.wait_s = wait_s
        self._idle: list[psycopg2.extensions.connection] = []
        self._lock = threading.Lock()
        # Callers queue here for up to `wait_s` when every session is in use.
        self._slots = threading.BoundedSemaphore(max_connections)

    def _checkout(self) -> psycopg2.extensions.connection:
        """A pooled session that is still open, else a new one."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                kwargs = connection_kwargs(self.application_name, connect_timeout_s=5)
                return psycopg2.connect(self.url, **kwargs)
            if _still_open(conn):
                return conn
            conn.close()

    def _checkin(self, conn: psycopg2.extensions.connection, *, broken: bool) -> None:
        if broken or conn.closed:
            conn.close()
            return
        with self._lock:
            self._idle.append(conn)

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        """A cursor in one transaction: committed when the block ends, rolled back when it
        raises. A broken connection is discarded, not returned to the pool. Connection
        failures raise `DatabaseUnavailable`."""
        if not self._slots.acquire(timeout=self.wait_s):
            raise DatabaseUnavailable(
                f"all {self.max_connections} database connections stayed busy for {self.wait_s:g} s"
            )
        try:
            conn = self._checkout()
        except psycopg2.OperationalError as exc:
            self._slots.release()
            raise DatabaseUnavailable(f"database unavailable: {exc}".strip()) from exc
        except BaseException:
            self._slots.release()
            raise
        broken: list[bool] = []
        try:
            with one_transaction(conn, lost=lambda: broken.append(True)) as cur:
                yield cur
        except psycopg2.OperationalError as exc:
            raise DatabaseUnavailable(f"database unavailable: {exc}".strip()) from exc
        finally:
            self._checkin(conn, broken=bool(broken))
            self._slots.release()

    def close(self) -> None:
        """Close every idle pooled connection (tests, shutdown, once the work is done)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _still_open(conn: psycopg2.extensions.connection) -> bool:
    """Whether an idle session is still there: it has nothing to say between transactions,
    so anything to read (the server's goodbye, or end of file) means the server ended it."""
    if conn.closed:
        return False
    try:
        readable, _, _ = select.select([conn], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def check_database(cur: Cursor) -> str | None:
    """What is wrong with the database for `/health` (None: nothing): raises when it does
    not answer; names its encoding when it is not UTF-8."""
    encoding = execute(cur, "check_database").fetchone()["encoding"]
    return None if encoding == "UTF8" else f"encoded {encoding}, not UTF8"


def database_now(cur: Cursor) -> datetime:
    """The database clock (what leases and deadlines are measured against)."""
    return execute(cur, "database_now").fetchone()["now"]
