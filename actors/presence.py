"""An executor's presence: its row in `executors`, announced at start, beaten every heartbeat
interval by a daemon thread whether or not a step runs, and marked stopped on a clean stop.
The metrics read it (`etl_executors_up`, `etl_executor_heartbeat_age_seconds`); a killed
executor simply stops beating. The announcement carries the marks of the export and reject
directories the executor sees: one that does not see the live executors' refuses to start."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg2

import connectors
from actors.errors import DirectoryMismatch
from actors.sql import QUERIES
from ddl import Cursor, KeptSession

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
        export_dir: Path,
        reject_dir: Path,
    ):
        self._connect = connect
        self._keys = {"name": name, "owner": owner}
        self._dirs = {"export_mark": Path(export_dir), "reject_mark": Path(reject_dir)}
        self._interval_s = interval_s
        self._stale_after_s = stale_after_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="presence", daemon=True)

    def __enter__(self) -> Presence:
        """Announce this executor; `DirectoryMismatch` (and the row marked stopped) if a live
        executor sees another export or reject directory."""
        marks = {key: connectors.directory_mark(d) for key, d in self._dirs.items()}
        params = {**self._keys, **marks, "pid": os.getpid(), "stale_after_s": self._stale_after_s}
        conn = self._connect()
        try:
            with conn.cursor(cursor_factory=Cursor) as cur:
                cur.execute(QUERIES["lock_executor_announcements"])
                cur.execute(QUERIES["announce_executor"], params)
                cur.execute(QUERIES["find_directory_mismatches"], params)
                others = cur.fetchall()
                if others:
                    cur.execute(QUERIES["retire_executor"], params)
            conn.commit()
        finally:
            conn.close()
        if others:
            raise DirectoryMismatch(self._mismatch(others[0], marks))
        self._thread.start()
        return self

    def _mismatch(self, other: dict, marks: dict[str, str]) -> str:
        name = other["name"]
        differ = [
            f"{'ETL_EXPORT_DIR' if key == 'export_mark' else 'ETL_REJECT_DIR'}"
            f" {self._dirs[key]} (id {marks[key]}, {name}'s: {other[key]})"
            for key in ("export_mark", "reject_mark")
            if other[key] is not None and other[key] != marks[key]
        ]
        return (
            f"executor {self._keys['name']} does not see the directories live executor {name}"
            f" sees: {'; '.join(differ)}. Every executor must mount the same export and reject"
            " directories (one shared volume or NFS export): a step staged on one could be"
            " neither resumed nor published by another (docs/compose.md)"
        )

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
        session = KeptSession(self._connect)
        while not self._stop.wait(self._interval_s):
            try:
                with session.transaction() as cur:
                    cur.execute(QUERIES["beat_executor"], self._keys)
            except psycopg2.Error as exc:  # a missed beat only ages the row
                log.warning("executor heartbeat failed: %s", exc)
        session.close()
