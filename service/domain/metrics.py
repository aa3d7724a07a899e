"""The platform's Prometheus metrics, read from the database at scrape time (one read-only
snapshot), so the answer is the same whichever gunicorn worker or process serves it; nothing
is counted in process memory. Counters, histograms and last-success/failure times come from
the totals that state changes keep (migration 0009: triggers append deltas in the changing
transaction, the sweep folds them): a scrape costs the same whatever the history. Gauges of
the present read the live rows. `service.api.metrics` serves it at `GET /metrics`;
docs/metrics.md ("Metrics") documents each metric and the label sets."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from dag import RunStatus, SkipReason
from service.domain.db import Cursor, Database, execute, fetch_all
from service.domain.processmetrics import api_request_family, process_families
from service.domain.schedules import FireSkip

log = logging.getLogger(__name__)

ENDED_RUN_STATUSES = (
    RunStatus.SUCCEEDED,
    RunStatus.FAILED,
    RunStatus.CANCELED,
    RunStatus.SKIPPED,
)


@dataclass(frozen=True)
class Kept:
    """A family kept in `metric_totals`: its Prometheus type, help and label names (a
    histogram's without `le`)."""

    kind: type
    text: str
    labels: tuple[str, ...]


KEPT = {
    "etl_runs_total": Kept(
        CounterMetricFamily,
        "Runs that ended, by pipeline and final status (a resumed run counts again when it"
        " ends again; skipped: refused by admission)",
        ("pipeline", "status"),
    ),
    "etl_triggers_skipped_total": Kept(
        CounterMetricFamily,
        "Triggers refused by admission and recorded as skipped runs, and schedule fires of a"
        " paused pipeline (paused, no run), by pipeline and reason",
        ("pipeline", "reason"),
    ),
    "etl_schedule_fires_total": Kept(
        CounterMetricFamily,
        "Scheduler fires by pipeline and outcome (admitted, skipped by admission; no run:"
        " paused, plan_invalid)",
        ("pipeline", "outcome"),
    ),
    "etl_runs_stalled_total": Kept(
        CounterMetricFamily,
        "Runs the sweep ended because nothing was runnable for longer than the lease",
        ("pipeline",),
    ),
    "etl_run_duration_seconds": Kept(
        HistogramMetricFamily,
        "First start to end of runs that ran, by pipeline",
        ("pipeline",),
    ),
    "etl_pipeline_last_success_timestamp_seconds": Kept(
        GaugeMetricFamily, "When a run of the pipeline last succeeded (Unix time)", ("pipeline",)
    ),
    "etl_pipeline_last_failure_timestamp_seconds": Kept(
        GaugeMetricFamily, "When a run of the pipeline last failed (Unix time)", ("pipeline",)
    ),
    "etl_steps_total": Kept(
        CounterMetricFamily,
        "Steps that reached a final status, by pipeline, step and status",
        ("pipeline", "step", "status"),
    ),
    "etl_step_duration_seconds": Kept(
        HistogramMetricFamily,
        "First start to end of steps that ended succeeded or failed, by pipeline and step",
        ("pipeline", "step"),
    ),
    "etl_records_total": Kept(
        CounterMetricFamily,
        "Records read (in) and rejected by steps that ended succeeded or failed, and written"
        " (out) by succeeded steps",
        ("pipeline", "step", "kind"),
    ),
    "etl_checks_total": Kept(
        CounterMetricFamily,
        "Data check results of steps that ended succeeded or failed, by pipeline, step, check"
        " kind and outcome (passed, failed, warned)",
        ("pipeline", "step", "check", "outcome"),
    ),
    "etl_step_retries_total": Kept(
        CounterMetricFamily,
        "Failed attempts followed by a retry (the step waits for its backoff)",
        ("pipeline", "step"),
    ),
    "etl_attempts_total": Kept(
        CounterMetricFamily,
        "Finished step attempts by pipeline and outcome",
        ("pipeline", "outcome"),
    ),
    "etl_lease_takeovers_total": Kept(
        CounterMetricFamily,
        "Leases that expired and were taken over (their steps go on in new attempts), one per"
        " lease however many fused steps it held, by pipeline and the executor that lost it",
        ("pipeline", "executor"),
    ),
}


HISTOGRAMS = {name for name, kept in KEPT.items() if kept.kind is HistogramMetricFamily}
# Families with a sample for every pipeline and value from the first scrape.
ZERO_FILLED = {
    "etl_runs_total": tuple(str(s) for s in ENDED_RUN_STATUSES),
    # refused by admission, and a paused pipeline's schedule fires (no run: migration 0014)
    "etl_triggers_skipped_total": (*(str(r) for r in SkipReason), str(FireSkip.PAUSED)),
}


class DatabaseCollector(Collector):
    """The platform's metrics, read from the database on every `collect()`."""

    def __init__(self, db: Database):
        self.db = db

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("etl_database_up", "1 if the metrics could be read, else 0")
        try:
            with self.db.transaction() as cur:
                execute(cur, "begin_metrics_snapshot")
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
        live = fetch_all(cur, "count_live_runs_by_pipeline")
        pipelines = sorted(r["pipeline"] for r in live)
        yield from _kept_families(cur, pipelines)
        queued = GaugeMetricFamily(
            "etl_queue_depth", "Queued runs per pipeline", labels=["pipeline"]
        )
        running = GaugeMetricFamily(
            "etl_runs_running", "Running runs per pipeline (0 or 1)", labels=["pipeline"]
        )
        for r in live:
            queued.add_metric([r["pipeline"]], r["queued"])
            running.add_metric([r["pipeline"]], r["running"])
        yield queued
        yield running
        yield from _backfills(cur, pipelines)
        leases = GaugeMetricFamily(
            "etl_active_leases", "Live step-attempt leases by executor", labels=["executor"]
        )
        for r in fetch_all(cur, "count_active_leases_by_executor"):
            leases.add_metric([r["executor"]], r["n"])
        yield leases
        yield from _executors(cur)
        yield from process_families(fetch_all(cur, "list_process_samples"))
        yield api_request_family(fetch_all(cur, "list_api_request_totals"))
        (oldest,) = fetch_all(cur, "oldest_queued_run_age")
        yield GaugeMetricFamily(
            "etl_oldest_queued_run_age_seconds",
            "Seconds since the oldest queued run was created (0 when none is queued)",
            value=oldest["seconds"],
        )


def _kept_families(cur: Cursor, pipelines: list[str]) -> Iterator[Metric]:
    """The families of `KEPT`, from the kept samples; every pipeline has its run outcomes
    and skip reasons from the first scrape (0 until something happens)."""
    metrics = {
        name: kept.kind(name, kept.text, labels=list(kept.labels)) for name, kept in KEPT.items()
    }
    (bounds,) = fetch_all(cur, "duration_bounds")
    edges = [float(b) for b in bounds["bounds"]]
    sums: dict[tuple[str, str], float] = {}
    series: list[tuple[str, dict, dict[float | None, float]]] = []
    ended: dict[str, dict[tuple[str, ...], float]] = defaultdict(dict)
    with cur.connection.cursor() as plain:  # tuples: a scrape reads thousands of rows
        execute(plain, "read_metric_samples")
        for family, labels, le, value in plain:
            if family.endswith("_sum"):
                sums[(family[:-4], json.dumps(labels, sort_keys=True))] = value
            elif le is not None or family in HISTOGRAMS:
                if not series or series[-1][0] != family or series[-1][1] != labels:
                    series.append((family, labels, {}))
                series[-1][2][None if le is None else float(le)] = value
            elif family in ZERO_FILLED:
                ended[family][tuple(labels.get(k, "") for k in KEPT[family].labels)] = value
            elif family in metrics:
                metrics[family].add_metric([labels.get(k, "") for k in KEPT[family].labels], value)
    for family, values in ZERO_FILLED.items():
        for pipeline in pipelines:
            for other in values:
                ended[family].setdefault((pipeline, other), 0.0)
        for key, value in sorted(ended[family].items()):
            metrics[family].add_metric(list(key), value)
    for family, labels, per_bucket in series:
        running, cumulative = 0.0, []
        for edge in edges:
            running += per_bucket.get(edge, 0.0)
            cumulative.append((repr(edge), running))
        cumulative.append(("+Inf", running + per_bucket.get(None, 0.0)))
        metrics[family].add_metric(
            [labels.get(k, "") for k in KEPT[family].labels],
            cumulative,
            sum_value=sums.get((family, json.dumps(labels, sort_keys=True)), 0.0),
        )
    yield from metrics.values()


BACKFILL_STATES = ("pending", "queued", "running")


def _backfills(cur: Cursor, pipelines: list[str]) -> Iterator[Metric]:
    """The values of live backfills by state, and the live backfills, of every pipeline
    (0 for one without): what is left of them, from the live rows."""
    values = GaugeMetricFamily(
        "etl_backfill_runs",
        "Values of live backfills by pipeline and state: pending (waiting for room), queued,"
        " running",
        labels=["pipeline", "state"],
    )
    live = GaugeMetricFamily(
        "etl_backfills_running",
        "Backfills with a value pending, queued or running, by pipeline",
        labels=["pipeline"],
    )
    rows = {r["pipeline"]: r for r in fetch_all(cur, "count_backfill_values_by_pipeline")}
    for pipeline in pipelines:
        row = rows.get(pipeline, {})
        for state in BACKFILL_STATES:
            values.add_metric([pipeline, state], row.get(state, 0))
        live.add_metric([pipeline], row.get("backfills", 0))
    yield values
    yield live


def _executors(cur: Cursor) -> Iterator[Metric]:
    age = GaugeMetricFamily(
        "etl_executor_heartbeat_age_seconds",
        "Seconds since each executor's last heartbeat (executors that did not stop cleanly"
        " and beat within the last hour)",
        labels=["executor"],
    )
    rows = fetch_all(cur, "list_executors")
    for r in rows:
        age.add_metric([r["executor"]], r["age"])
    yield age
    yield GaugeMetricFamily(
        "etl_executors_up",
        "Executors whose last heartbeat is within their lease TTL",
        value=sum(1 for r in rows if r["up"]),
    )
