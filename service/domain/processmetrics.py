"""The platform's own processes in the metrics (docs/metrics.md): the `process_*` values
that the coordinator and each executor put every heartbeat interval
(`service.run.process_samples`), and the API's request durations that each API worker adds
about once a second (`service.api.request_metrics`). Both are written in the caller's
transaction (migration 0032's tables) and read by `service.domain.metrics` at scrape time,
so any worker's scrape reports every process."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from service.domain.db import Cursor, Database, execute

log = logging.getLogger(__name__)

# The bounds (seconds) of `etl_api_request_duration_seconds`: an API call takes
# milliseconds, not the minutes of the run and step histograms.
API_DURATION_BOUNDS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# prometheus_client's process collector's sample -> its column in `process_samples`.
PROCESS_COLUMNS = {
    "process_cpu_seconds_total": "cpu_seconds",
    "process_resident_memory_bytes": "resident_bytes",
    "process_virtual_memory_bytes": "virtual_bytes",
    "process_start_time_seconds": "start_time_seconds",
    "process_open_fds": "open_fds",
    "process_max_fds": "max_fds",
}


@dataclass
class RequestSeries:
    """The requests of one (method, route template, status) since the last addition: how
    many fell in each bucket of `API_DURATION_BOUNDS_S` (the last: above every bound)."""

    buckets: list[float] = field(default_factory=lambda: [0.0] * (len(API_DURATION_BOUNDS_S) + 1))
    count: float = 0.0
    sum_s: float = 0.0

    def observe(self, seconds: float) -> None:
        """Count one request that took `seconds`."""
        index = next((i for i, b in enumerate(API_DURATION_BOUNDS_S) if seconds <= b), -1)
        self.buckets[index] += 1
        self.count += 1
        self.sum_s += seconds

    def merge(self, other: RequestSeries) -> None:
        """Add `other`'s requests to these."""
        self.buckets = [a + b for a, b in zip(self.buckets, other.buckets, strict=True)]
        self.count += other.count
        self.sum_s += other.sum_s


class RequestTotals:
    """One API process's requests not yet added to the totals, by (method, route template,
    status); thread-safe. `add_due` adds them at most once every `every_s` (the request
    path calls it, so an idle worker writes nothing), `add_now` at once (a scrape). They
    are written through `db`, a pool of their own (one session), so the API's pool and the
    scrape's one read a second are left alone; without `db` nothing is written."""

    def __init__(
        self,
        db: Database | None = None,
        every_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.db, self.every_s, self._clock = db, every_s, clock
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str, str], RequestSeries] = {}
        self._added_at = clock()

    def observe(self, method: str, route: str, status: str, seconds: float) -> None:
        """Count one answered request."""
        with self._lock:
            self._pending.setdefault((method, route, status), RequestSeries()).observe(seconds)

    def add_due(self) -> None:
        """`add_now` when the last addition is `every_s` old."""
        if self._clock() - self._added_at >= self.every_s:
            self.add_now()

    def add_now(self) -> None:
        """Add the pending requests to the totals in one transaction; when the database
        does not take them they stay pending (logged), for the next addition."""
        with self._lock:
            pending, self._pending = self._pending, {}
            self._added_at = self._clock()
        if not pending or self.db is None:
            return
        try:
            with self.db.transaction() as cur:
                add_api_request_totals(cur, sorted(pending.items()))  # one lock order
        except Exception as exc:
            log.warning("API request metrics not written, kept for the next time: %s", exc)
            with self._lock:
                for key, series in pending.items():
                    self._pending.setdefault(key, RequestSeries()).merge(series)


def put_process_sample(
    cur: Cursor, process: str, role: str, stale_after_s: float, values: Mapping[str, float]
) -> None:
    """Replace `process`'s values (sample name -> value, the names of `PROCESS_COLUMNS`; a
    missing one is NULL, left out of the scrape); kept in the scrape for `stale_after_s`."""
    row = {column: values.get(name) for name, column in PROCESS_COLUMNS.items()}
    execute(
        cur,
        "put_process_sample",
        {"process": process, "role": role, "stale_after_s": stale_after_s, **row},
    )


def delete_process_sample(cur: Cursor, process: str) -> None:
    """Take a cleanly stopping process's values out of the scrape."""
    execute(cur, "delete_process_sample", {"process": process})


def add_api_request_totals(
    cur: Cursor, series: Iterable[tuple[tuple[str, str, str], RequestSeries]]
) -> None:
    """Add each (method, route template, status)'s requests to its totals."""
    for (method, route, status), s in series:
        params = {"method": method, "route": route, "status": status,
                  "buckets": s.buckets, "count": s.count, "sum_s": s.sum_s}  # fmt: skip
        execute(cur, "add_api_request_totals", params)


# (family, Prometheus type, help) of each `process_samples` column, as prometheus_client's
# process collector names them, with the process (and its role) as labels.
PROCESS_FAMILIES = {
    "cpu_seconds": ("process_cpu_seconds", CounterMetricFamily,
                    "Total user and system CPU time spent in seconds"),
    "resident_bytes": ("process_resident_memory_bytes", GaugeMetricFamily,
                       "Resident memory size in bytes"),
    "virtual_bytes": ("process_virtual_memory_bytes", GaugeMetricFamily,
                      "Virtual memory size in bytes"),
    "start_time_seconds": ("process_start_time_seconds", GaugeMetricFamily,
                           "Start time of the process since unix epoch in seconds"),
    "open_fds": ("process_open_fds", GaugeMetricFamily, "Number of open file descriptors"),
    "max_fds": ("process_max_fds", GaugeMetricFamily, "Maximum number of open file descriptors"),
}  # fmt: skip


def process_families(rows: Iterable[Mapping[str, Any]]) -> Iterator[Metric]:
    """The `process_*` families of the processes' rows (`list_process_samples`), labelled
    by `process` (the coordinator's or the executor's name) and `role`."""
    families = {
        column: kind(name, text, labels=["process", "role"])
        for column, (name, kind, text) in PROCESS_FAMILIES.items()
    }
    for row in rows:
        for column, family in families.items():
            if row[column] is not None:
                family.add_metric([row["process"], row["role"]], row[column])
    yield from families.values()


def api_request_family(rows: Iterable[Mapping[str, Any]]) -> Metric:
    """`etl_api_request_duration_seconds` of the series' totals (`list_api_request_totals`)."""
    family = HistogramMetricFamily(
        "etl_api_request_duration_seconds",
        "API requests by method, route template and status: seconds from the request read to"
        " the answer ready",
        labels=["method", "route", "status"],
    )
    for row in rows:
        counts = list(row["buckets"])
        if len(counts) != len(API_DURATION_BOUNDS_S) + 1:
            continue  # other bounds (another version's): left out rather than misread
        buckets, running = [], 0.0
        for bound, n in zip((*map(repr, API_DURATION_BOUNDS_S), "+Inf"), counts, strict=True):
            running += n
            buckets.append((bound, running))
        family.add_metric([row["method"], row["route"], row["status"]], buckets, row["sum_s"])
    return family
