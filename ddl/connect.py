"""The one way to open a PostgreSQL connection: every process, pool, test harness and
benchmark names itself (`application_name`, shown in `pg_stat_activity`), runs its session
in UTC, gives up connecting after a bounded time, and may cap statements and lock waits.
An asynchronous connection (`asynchronous=True`) sends a query and returns; `wait` waits
for its answer."""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from typing import Any

import psycopg2
import psycopg2.extensions

CONNECT_TIMEOUT_S = 10
# Server shutting down (fast or crash), or still starting up: the session is gone, not the
# statement wrong. (Class 08 is every "connection exception".)
_LOST_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})

Connection = psycopg2.extensions.connection


def connection_kwargs(
    app: str,
    *,
    statement_timeout_s: float | None = None,
    idle_in_transaction_timeout_s: float | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    synchronous_commit: bool = True,
) -> dict[str, Any]:
    """The keyword arguments `psycopg2.connect` (or a pool) takes for a session of `app`.
    `idle_in_transaction_timeout_s` ends a session that sits in an open transaction that
    long (a process frozen mid-commit must not hold its row locks forever). Without
    `synchronous_commit` a commit returns before its WAL is flushed: a crash of the server
    may take back the last such commits, whole and in order, until a later synchronous
    commit of any session flushes them."""
    options = "-c timezone=UTC"
    if not synchronous_commit:
        options += " -c synchronous_commit=off"
    if statement_timeout_s is not None:
        ms = int(statement_timeout_s * 1000)
        options += f" -c statement_timeout={ms} -c lock_timeout={ms}"
    if idle_in_transaction_timeout_s is not None:
        ms = int(idle_in_transaction_timeout_s * 1000)
        options += f" -c idle_in_transaction_session_timeout={ms}"
    return {
        "application_name": app,
        "options": options,
        "connect_timeout": max(1, int(connect_timeout_s)),
    }


def connect(url: str, app: str, *, asynchronous: bool = False, **kwargs: Any) -> Connection:
    """A new connection to `url` for `app` (see `connection_kwargs` for the options). An
    asynchronous one is in autocommit (each query its own transaction) and answers through
    `wait`; it is connected when this returns, or refused within the connect timeout."""
    options = connection_kwargs(app, **kwargs)
    if not asynchronous:
        return psycopg2.connect(url, **options)
    conn = psycopg2.connect(url, async_=1, **options)
    try:
        wait(conn, timeout_s=options["connect_timeout"])
    except BaseException:
        conn.close()
        raise
    return conn


def connector(url: str, app: str, **kwargs: Any) -> Callable[[], Connection]:
    """A function that opens a new such connection each time it is called."""
    return lambda: connect(url, app, **kwargs)


def wait(conn: Connection, *, timeout_s: float | None = None) -> None:
    """Wait until the asynchronous `conn` has finished what it was doing (connecting, or
    the query it sent), raising what the server answered with an error; after `timeout_s`
    (None: no limit) `psycopg2.OperationalError`."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        state = conn.poll()
        if state == psycopg2.extensions.POLL_OK:
            return
        fd = conn.fileno()
        reading = state == psycopg2.extensions.POLL_READ
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise psycopg2.OperationalError(f"no answer from the database in {timeout_s:g} s")
        select.select([fd] if reading else [], [] if reading else [fd], [], left)


def connection_lost(exc: BaseException | None) -> bool:
    """True when `exc`, or an error it was raised from or while handling, says the session
    is gone: the server restarted, terminated the backend, or cannot be reached. Statement
    and lock timeouts, deadlocks and data errors are not losses: the session lives on."""
    for _ in range(5):  # a short chain: the driver error, and a rollback failing after it
        if exc is None:
            return False
        if isinstance(exc, psycopg2.InterfaceError):
            return True
        if isinstance(exc, psycopg2.OperationalError):
            code = exc.pgcode
            if code is None or code.startswith("08") or code in _LOST_SQLSTATES:
                return True
        exc = exc.__cause__ or exc.__context__
    return False
