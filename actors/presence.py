"""An executor's presence: its row in `executors`, announced at start, beaten every heartbeat
interval by a daemon thread whether or not a step runs, and marked stopped on a clean stop.
The metrics read it (`etl_executors_up`, `etl_executor_heartbeat_age_seconds`); a killed
executor simply stops beating."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import psycopg2

from actors.sql import QUERIES

log = logging.getLogger("etl.presence")


class Presence:
    """`with Presence(...):` around an executor's life."""

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        name: str,
        owner: str,
        interval_s: float,
        stale_after_s: float,
    ):
        self._connect = connect
        self._keys = {"name": name, "owner": owner}
        self._interval_s = interval_s
        self._stale_after_s = stale_after_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="presence", daemon=True)

    def __enter__(self) -> Presence:
        self._execute(
            "announce_executor", {"pid": os.getpid(), "stale_after_s": self._stale_after_s}
        )
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval_s + 5)
        try:
            self._execute("retire_executor")
        except psycopg2.Error as exc:  # the row then ages out like a killed executor's
            log.warning("could not mark the executor stopped: %s", exc)

    def _execute(self, query: str, params: dict | None = None) -> None:
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute(QUERIES[query], {**self._keys, **(params or {})})
            conn.commit()
        finally:
            conn.close()

    def _run(self) -> None:
        conn = None
        while not self._stop.wait(self._interval_s):
            try:
                if conn is None or conn.closed:
                    conn = self._connect()
                with conn.cursor() as cur:
                    cur.execute(QUERIES["beat_executor"], self._keys)
                conn.commit()
            except psycopg2.Error as exc:  # a missed beat only ages the row
                log.warning("executor heartbeat failed: %s", exc)
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()
