"""The coordinator's database access: a small connection pool, one-transaction blocks, and
the named queries of `service/domain/sql/queries.sql` (loaded once, called by name). Only
`service.domain` runs SQL; the faces (API, console, CLI) call its functions."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg2
import psycopg2.extras
import psycopg2.pool

from ddl import connection_kwargs
from service.domain.sql import QUERIES
from service.errors import DatabaseUnavailable

log = logging.getLogger(__name__)


Cursor = psycopg2.extras.RealDictCursor


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
    """A lazily opened, thread-safe pool of connections to `url`.

    Opened on first use so that a gunicorn worker builds its own pool after the fork.
    Sessions run in UTC so timestamps come back as UTC-aware datetimes."""

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
        self._pool: psycopg2.pool.ThreadedConnectionPool | None = None
        self._lock = threading.Lock()
        # psycopg2's pool raises at once when every connection is out; with threaded
        # gunicorn workers, callers queue here for up to `wait_s` instead.
        self._slots = threading.BoundedSemaphore(max_connections)

    def _get_pool(self) -> psycopg2.pool.ThreadedConnectionPool:
        with self._lock:
            if self._pool is None:
                self._pool = psycopg2.pool.ThreadedConnectionPool(
                    0,
                    self.max_connections,
                    self.url,
                    **connection_kwargs(self.application_name, connect_timeout_s=5),
                )
            return self._pool

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
            pool = self._get_pool()
            conn = pool.getconn()
        except (psycopg2.OperationalError, psycopg2.pool.PoolError) as exc:
            self._slots.release()
            raise DatabaseUnavailable(f"database unavailable: {exc}".strip()) from exc
        except BaseException:
            self._slots.release()
            raise
        broken = False
        try:
            with conn.cursor(cursor_factory=Cursor) as cur:
                yield cur
            conn.commit()
        except BaseException as exc:
            broken = isinstance(exc, psycopg2.OperationalError | psycopg2.InterfaceError)
            if not conn.closed:
                try:
                    conn.rollback()
                except psycopg2.Error:
                    broken = True
            if isinstance(exc, psycopg2.OperationalError):
                raise DatabaseUnavailable(f"database unavailable: {exc}".strip()) from exc
            raise
        finally:
            pool.putconn(conn, close=broken or bool(conn.closed))
            self._slots.release()

    def close(self) -> None:
        """Close every pooled connection (tests, shutdown)."""
        with self._lock:
            if self._pool is not None:
                self._pool.closeall()
                self._pool = None


def check_database(cur: Cursor) -> str | None:
    """What is wrong with the database for `/health` (None: nothing): raises when it does
    not answer; names its encoding when it is not UTF-8."""
    encoding = execute(cur, "check_database").fetchone()["encoding"]
    return None if encoding == "UTF8" else f"encoded {encoding}, not UTF8"


def database_now(cur: Cursor) -> datetime:
    """The database clock (what leases and deadlines are measured against)."""
    return execute(cur, "database_now").fetchone()["now"]
