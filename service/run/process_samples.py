"""This process's `process_*` metrics (prometheus_client's process collector: CPU seconds,
resident and virtual memory, start time, open and maximum file descriptors) put into the
database every `every_s`, where `GET /metrics` reads them whichever API worker answers
(docs/metrics.md). The coordinator and each executor run one; a clean stop takes the row
out of the scrape, a killed process's row leaves it after `3 * every_s`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg2
from prometheus_client import ProcessCollector

from ddl import KeptSession
from service.domain.processmetrics import delete_process_sample, put_process_sample

log = logging.getLogger("etl.process")


def process_values(collector: ProcessCollector | None = None) -> dict[str, float]:
    """This process's values by sample name (`process_cpu_seconds_total`, ...); empty
    where the platform has no `/proc` (the collector reports nothing there)."""
    collector = collector or ProcessCollector(registry=None)
    return {s.name: s.value for family in collector.collect() for s in family.samples}


class ProcessSampler:
    """Puts the values of process `process` (its name: `coordinator`, `executor-1`) of
    `role` every `every_s` on a daemon thread, from entering to leaving the block; leaving
    deletes the row. A database error is logged and the next pass opens a new session."""

    def __init__(self, connect: Callable, process: str, role: str, every_s: float):
        self.process, self.role, self.every_s = process, role, every_s
        self._session = KeptSession(connect)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="process-sampler", daemon=True)

    def __enter__(self) -> ProcessSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every_s + 10)
        try:
            with self._session.transaction() as cur:
                delete_process_sample(cur, self.process)
        except psycopg2.Error as exc:
            log.warning("process metrics of %s not taken out: %s", self.process, exc)
        self._session.close()

    def put_once(self) -> None:
        """Put this process's values now."""
        values = process_values()
        with self._session.transaction() as cur:
            put_process_sample(cur, self.process, self.role, 3 * self.every_s, values)

    def _loop(self) -> None:
        while True:
            try:
                self.put_once()
            except psycopg2.Error as exc:
                log.warning("process metrics of %s not written: %s", self.process, exc)
            if self._stop.wait(self.every_s):
                return
