"""`service.domain.db.Database` on a real PostgreSQL: transactions reuse pooled sessions
(opening one costs a backend process and its authentication), and a pooled session the
server ended is replaced, not handed out; a kept session (a loop's) is opened again."""

from __future__ import annotations

import psycopg2
import pytest

from ddl import KeptSession
from service.domain.db import Database


def _session(db: Database) -> tuple:
    with db.transaction() as cur:
        cur.execute("SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()")
        row = cur.fetchone()
        return row["pid"], row["backend_start"]


def test_transactions_reuse_pooled_sessions(db_url: str) -> None:
    # Regression: every transaction opened (and closed) a session of its own.
    db = Database(db_url, max_connections=4, application_name="etl-test")
    try:
        sessions = {_session(db) for _ in range(100)}
    finally:
        db.close()
    assert len(sessions) <= 4, len(sessions)


def test_a_pooled_session_the_server_ended_is_replaced(db_url: str) -> None:
    db = Database(db_url, max_connections=2, application_name="etl-test")
    try:
        first = _session(db)
        admin = psycopg2.connect(db_url)
        admin.autocommit = True
        with admin.cursor() as cur:
            # With a timeout it returns once each backend is gone, its goodbye sent: the
            # pool is to see a session the server ended, not one it is still ending.
            cur.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        admin.close()
        for _ in range(3):  # no transaction fails on a dead session
            assert _session(db) != first
    finally:
        db.close()


def test_a_kept_session_the_server_ended_is_opened_again_on_its_next_use(db_url: str) -> None:
    kept = KeptSession(lambda: psycopg2.connect(db_url, application_name="etl-test-kept"))
    try:
        with kept.transaction() as cur:
            cur.execute("SELECT pg_backend_pid() AS pid")
            first = cur.fetchone()["pid"]
        with kept.transaction() as cur:  # kept: the same session
            cur.execute("SELECT pg_backend_pid() AS pid")
            assert cur.fetchone()["pid"] == first
        admin = psycopg2.connect(db_url)
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", (first,))
        admin.close()
        with pytest.raises(psycopg2.OperationalError), kept.transaction() as cur:
            cur.execute("SELECT 1")  # the loss is the caller's to log
        with kept.transaction() as cur:
            cur.execute("SELECT pg_backend_pid() AS pid")
            assert cur.fetchone()["pid"] != first
    finally:
        kept.close()
