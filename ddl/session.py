"""One transaction on a connection, and a session a long-lived loop keeps: the one place the
reopen-a-lost-connection idiom is written, used by every layer (the engine's heartbeats,
sweep, advancer and lineage reader; the coordinator's scheduler, backfiller, watcher,
notifier and samplers). Rows come back as dicts (`Cursor`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg2
import psycopg2.extensions
import psycopg2.extras

Cursor = psycopg2.extras.RealDictCursor


@contextmanager
def one_transaction(
    conn: psycopg2.extensions.connection, *, lost: Callable[[], None]
) -> Iterator[Cursor]:
    """A cursor in one transaction on `conn`: committed when the block ends, rolled back when
    it raises (the error propagates); `lost()` is called first when the session is gone (a
    connection error, or a rollback that fails)."""
    try:
        with conn.cursor(cursor_factory=Cursor) as cur:
            yield cur
        conn.commit()
    except BaseException as exc:
        gone = isinstance(exc, psycopg2.OperationalError | psycopg2.InterfaceError)
        if not conn.closed:
            try:
                conn.rollback()
            except psycopg2.Error:
                gone = True
        if gone:
            lost()
        raise


class KeptSession:
    """One session kept by a background loop and opened again on its next use once lost.
    `connect` opens a new session."""

    def __init__(self, connect: Callable[[], psycopg2.extensions.connection]):
        self._connect = connect
        self._conn: psycopg2.extensions.connection | None = None

    def connection(self) -> psycopg2.extensions.connection:
        """The kept session, opened if there is none or it was closed (for a caller that runs
        its own transactions on it; it calls `close()` when it finds the session lost)."""
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        return self._conn

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        """A cursor in one transaction on the kept session (opened if there is none): committed
        when the block ends, rolled back when it raises; a lost session is closed, so the next
        use opens a new one. The driver's error propagates."""
        with one_transaction(self.connection(), lost=self.close) as cur:
            yield cur

    def close(self) -> None:
        """Close the session, if open (a later use opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            try:
                conn.close()
            except psycopg2.Error:
                pass
