"""The one way to open a PostgreSQL connection: every process, pool, test harness and
benchmark names itself (`application_name`, shown in `pg_stat_activity`), runs its session
in UTC, gives up connecting after a bounded time, and may cap statements and lock waits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg2
import psycopg2.extensions

CONNECT_TIMEOUT_S = 10

Connection = psycopg2.extensions.connection


def connection_kwargs(
    app: str,
    *,
    statement_timeout_s: float | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> dict[str, Any]:
    """The keyword arguments `psycopg2.connect` (or a pool) takes for a session of `app`."""
    options = "-c timezone=UTC"
    if statement_timeout_s is not None:
        ms = int(statement_timeout_s * 1000)
        options += f" -c statement_timeout={ms} -c lock_timeout={ms}"
    return {
        "application_name": app,
        "options": options,
        "connect_timeout": max(1, int(connect_timeout_s)),
    }


def connect(url: str, app: str, **kwargs: Any) -> Connection:
    """A new connection to `url` for `app` (see `connection_kwargs` for the options)."""
    return psycopg2.connect(url, **connection_kwargs(app, **kwargs))


def connector(url: str, app: str, **kwargs: Any) -> Callable[[], Connection]:
    """A function that opens a new such connection each time it is called."""
    return lambda: connect(url, app, **kwargs)
