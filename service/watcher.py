"""The watcher: turns the files arriving under `ETL_DATA_DIR` into runs of the pipelines whose
schedules watch them (`{"watch": GLOB}`), in the coordinator process (`etl coordinator`).

It polls: every `poll_s` seconds it lists each live watch schedule's glob (Python's `glob`,
as an ingest path's glob, relative to the data directory; names starting with a dot are not
matched by `*`), and stats every match. A file is complete once it has stopped changing: the
same size and modification time (nanoseconds) seen by two polls in a row, and nothing
changed for `settle_s` seconds (its modification time is that old by the clock, or this
watcher has seen it unchanged that long). Its content is then hashed (SHA-256, read through
`connectors.files.open_source`, the ingest's own guard: a path whose real path leaves the
data directory, a hard link, anything but a regular file is never triggered), re-checked
unchanged, and recorded with `service.domain.watches.record_files` (a file the pipeline knows
by path and digest records nothing). The same pass then admits pending files as their
pipelines have room (`admit_waiting_files`) and, after COMMIT, wakes the dag-advancer.

What it remembers in memory (what it saw at the last poll, what it recorded) only saves
work: the database decides, so a restart or a second coordinator triggers nothing twice.
Polling, not inotify: it works the same on bind mounts, network file systems and every
platform (docs/decisions.md)."""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors import send_advance_run
from connectors import SourceMissing, SourceRefused
from connectors.files import open_source
from ddl import connector
from service.config import Config
from service.domain.watches import (
    FoundFile,
    admit_waiting_files,
    list_live_watches,
    record_files,
    triggerable_path_problem,
)
from service.passes import Connect, PassLoop, Wake

log = logging.getLogger("etl.watcher")

_CHUNK = 1 << 20


@dataclass
class _Seen:
    """A match as the last poll saw it: its (size, mtime_ns), since when (monotonic) it
    has looked so, and whether it is dealt with (recorded, known, or never triggerable)."""

    key: tuple[int, int]
    since: float
    done: bool = False


class Watcher(PassLoop):
    """A thread calling `poll_once` every `poll_s` until `shutdown`. `connect()` opens a new
    psycopg2 connection; `wake(run_id, trace_id)` is called after COMMIT for each run that
    needs the dag-advancer; `clock()` is the wall clock compared with modification times."""

    what = "poll"

    def __init__(
        self,
        connect: Connect,
        wake: Wake,
        data_dir: Path,
        *,
        poll_s: float = 1.0,
        settle_s: float = 2.0,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], uuid.UUID] = uuid.uuid4,
    ):
        super().__init__("watcher", connect, wake, poll_s, log)
        self._root = os.path.realpath(data_dir)
        self.poll_s = poll_s
        self.settle_s = settle_s
        self._clock = clock
        self._new_id = new_id
        self._seen: dict[str, dict[str, _Seen]] = {}  # schedule id -> path -> last look

    def start(self) -> None:
        super().start()
        log.info("watcher started: every %s s, settle %s s", self.poll_s, self.settle_s)

    def run_pass(self) -> int:
        return self.poll_once()

    def poll_once(self) -> int:
        """Look at every live watch schedule's files, record the settled new ones, then
        admit pending files where there is room; the number of runs admitted."""
        with self._session.transaction() as cur:
            watches = list_live_watches(cur)
        for gone in set(self._seen) - {str(w["id"]) for w in watches}:
            del self._seen[gone]
        if not watches:
            return 0  # only a live watch schedule's files are admitted: no lock taken
        for watch in watches:
            self._record(str(watch["id"]), self._settled(str(watch["id"]), watch["watch"]))
        with self._session.transaction() as cur:
            admitted = admit_waiting_files(cur, new_id=self._new_id)
        for admission in admitted:
            self._admitted(admission)
        return len(admitted)

    def _record(self, schedule_id: str, found: list[tuple[FoundFile, _Seen]]) -> None:
        if not found:
            return
        with self._session.transaction() as cur:
            recorded = record_files(cur, schedule_id, [f for f, _ in found])
        for _, seen in found:  # committed: known to the database from here on
            seen.done = True
        for path in recorded:
            log.info("schedule %s: file %s is waiting for its run", schedule_id, path)

    def _settled(self, schedule_id: str, pattern: str) -> list[tuple[FoundFile, _Seen]]:
        """The matches of `pattern` that are complete and not dealt with yet, hashed."""
        before = self._seen.get(schedule_id, {})
        now: dict[str, _Seen] = {}
        found: list[tuple[FoundFile, _Seen]] = []
        for path in sorted(glob.glob(pattern, root_dir=self._root)):
            try:
                st = os.stat(os.path.join(self._root, path))
            except OSError:
                continue  # gone meanwhile, or unreadable: looked at again next poll
            key = (st.st_size, st.st_mtime_ns)
            seen = before.get(path)
            if seen is None or seen.key != key:
                now[path] = _Seen(key, time.monotonic())
                continue
            now[path] = seen
            # unchanged that long by its mtime, or (an mtime ahead of our clock) as we saw it
            quiet = max(self._clock() - st.st_mtime_ns / 1e9, time.monotonic() - seen.since)
            if seen.done or quiet < self.settle_s:
                continue
            file = self._hashed(schedule_id, path, key)
            if file is None:
                seen.done = True  # never triggerable (until it changes)
            elif file.digest:
                found.append((file, seen))
            else:
                now[path] = _Seen(key, time.monotonic())  # it changed while hashed
        self._seen[schedule_id] = now
        return found

    def _hashed(self, schedule_id: str, path: str, key: tuple[int, int]) -> FoundFile | None:
        """The file with its digest; a digest "" when it changed while read; None when its
        path can never be a run's `file` (logged)."""
        problem = triggerable_path_problem(path)
        try:
            if problem is None:
                with open_source(Path(self._root), path, max_bytes=sys.maxsize) as f:
                    digest = hashlib.sha256()
                    while chunk := f.read(_CHUNK):
                        digest.update(chunk)
                    after = os.fstat(f.fileno())
                if (after.st_size, after.st_mtime_ns) != key:
                    return FoundFile(path, "", key[0])
                return FoundFile(path, digest.hexdigest(), key[0])
        except (SourceRefused, SourceMissing) as exc:
            problem = str(exc)
        log.warning("schedule %s: file %s is never triggered: %s", schedule_id, path, problem)
        return None


def start_watcher(cfg: Config, broker: Any) -> Watcher:
    """The coordinator's watcher, started: files under `cfg.data_dir`, admissions in
    `cfg.database_url`, wake-ups of the dag-advancer through `broker`."""

    def wake(run_id: str, trace_id: str) -> None:
        send_advance_run(broker, run_id, trace_id)

    watcher = Watcher(
        connector(cfg.database_url, "etl-watcher"),
        wake,
        cfg.data_dir,
        poll_s=cfg.watch_poll_s,
        settle_s=cfg.watch_settle_s,
    )
    watcher.start()
    return watcher
