"""The platform's Prometheus metrics: a custom collector reads every value from the database
at scrape time (`service/domain/sql/metrics.sql`, one read-only snapshot), so the answer is
the same whichever gunicorn worker or process serves it; nothing is counted in process
memory. `service.api.metrics` serves it at `GET /metrics`; README.md ("Metrics") documents
each metric."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from dag import RunStatus, SkipReason
from service.domain.db import Cursor, Database
from service.domain.sql import METRICS_QUERIES as QUERIES

log = logging.getLogger(__name__)


RUN_STATUSES = tuple(RunStatus)
SKIP_REASONS = tuple(SkipReason)
STEP_DURATION_BOUNDS_S = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


def _rows(cur: Cursor, name: str, params: dict[str, Any] | None = None) -> list[dict]:
    cur.execute(QUERIES[name], params or {})
    return [dict(r) for r in cur.fetchall()]


# Families with one sample per row of their query: (family, name, help, query, labels).
PER_ROW = (
    (
        GaugeMetricFamily,
        "etl_queue_depth",
        "Queued runs per pipeline",
        "count_queued_runs_by_pipeline",
        ("pipeline",),
    ),
    (
        GaugeMetricFamily,
        "etl_active_leases",
        "Live step-attempt leases by executor",
        "count_active_leases_by_executor",
        ("executor",),
    ),
    (
        CounterMetricFamily,
        "etl_lease_takeovers",
        "Attempts whose lease expired and whose step went on in a new attempt, by the executor"
        " that lost the lease",
        "count_lease_takeovers_by_executor",
        ("executor",),
    ),
    (
        CounterMetricFamily,
        "etl_attempts",
        "Finished step attempts by outcome",
        "count_attempts_by_outcome",
        ("outcome",),
    ),
    (
        CounterMetricFamily,
        "etl_schedule_fires",
        "Scheduler fires by pipeline and whether admission took them",
        "count_schedule_fires_by_pipeline",
        ("pipeline", "outcome"),
    ),
    (
        CounterMetricFamily,
        "etl_runs_stalled",
        "Runs the sweep ended because nothing was runnable for longer than the lease",
        "count_stalled_runs_by_pipeline",
        ("pipeline",),
    ),
)


def _zero_filled(
    cur: Cursor, family: type, name: str, text: str, query: str, label: str, values: Iterable[str]
) -> Metric:
    """A family with one sample per value of `label`, from the `{label, n}` rows of `query`;
    0 for a value without a row, so every series exists from the first scrape."""
    counts = {r[label]: r["n"] for r in _rows(cur, query)}
    metric = family(name, text, labels=[label])
    for value in values:
        metric.add_metric([value], counts.get(value, 0))
    return metric


class DatabaseCollector(Collector):
    """The platform's metrics, read from the database on every `collect()`."""

    def __init__(self, db: Database):
        self.db = db

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("etl_database_up", "1 if the metrics could be read, else 0")
        try:
            with self.db.transaction() as cur:
                cur.execute(QUERIES["begin_metrics_snapshot"])
                metrics = list(self._read(cur))
        except Exception as exc:  # a scrape must answer, even without a database
            log.warning("metrics: database unavailable: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from metrics

    def _read(self, cur: Cursor) -> Iterator[Metric]:
        yield _zero_filled(
            cur,
            GaugeMetricFamily,
            "etl_runs",
            "Runs by status",
            "count_runs_by_status",
            "status",
            RUN_STATUSES,
        )
        yield _zero_filled(
            cur,
            CounterMetricFamily,
            "etl_skipped_triggers",
            "Triggers refused by admission, by reason",
            "count_skipped_runs_by_reason",
            "reason",
            SKIP_REASONS,
        )
        for family, name, text, query, labels in PER_ROW:
            metric = family(name, text, labels=list(labels))
            for r in _rows(cur, query):
                metric.add_metric([r[label] for label in labels], r["n"])
            yield metric
        yield self._step_durations(cur)
        yield from self._step_records(cur)
        (oldest,) = _rows(cur, "oldest_queued_run_age")
        yield GaugeMetricFamily(
            "etl_oldest_queued_run_age_seconds",
            "Seconds since the oldest queued run was created (0 when none is queued)",
            value=oldest["seconds"],
        )

    def _step_durations(self, cur: Cursor) -> Metric:
        histogram = HistogramMetricFamily(
            "etl_step_duration_seconds",
            "Duration of finished steps (first start to finish), by type and status",
            labels=["type", "status"],
        )
        params = {"bounds": list(STEP_DURATION_BOUNDS_S)}
        le: dict[tuple[str, str], dict[float, int]] = {}
        for r in _rows(cur, "step_duration_buckets", params):
            le.setdefault((r["type"], r["status"]), {})[r["le"]] = r["n"]
        for r in _rows(cur, "step_duration_totals"):
            key = (r["type"], r["status"])
            buckets = [(_bound(b), le.get(key, {}).get(b, 0)) for b in STEP_DURATION_BOUNDS_S]
            buckets.append(("+Inf", r["n"]))
            histogram.add_metric(list(key), buckets, sum_value=r["seconds"])
        return histogram

    def _step_records(self, cur: Cursor) -> Iterator[Metric]:
        records = CounterMetricFamily(
            "etl_step_records",
            "Records read (in) and written (out) by succeeded steps, by step type",
            labels=["type", "direction"],
        )
        rejected = CounterMetricFamily(
            "etl_rejected_rows", "Rows rejected by succeeded steps, by step type", labels=["type"]
        )
        for r in _rows(cur, "sum_step_records_by_type"):
            records.add_metric([r["type"], "in"], r["records_in"])
            records.add_metric([r["type"], "out"], r["records_out"])
            rejected.add_metric([r["type"]], r["rejected"])
        yield records
        yield rejected


def _bound(value: float) -> str:
    return repr(float(value))
