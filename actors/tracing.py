"""The engine's spans (docs/tracing.md): one per step attempt, one per export, one per run.

Every span of a run is in the run's trace and hangs off the span the run keeps
(`runs.parent_span_id`: its trigger span, made in the API's or the scheduler's process), a
remote parent rebuilt from the run row by whichever process picks the run up:

    trigger_run / fire_schedule   the trigger (service.tracing)
    +-- run                       queued -> ended, emitted by the dag-advancer as it ends it
    +-- step_attempt              the claimed step's attempt, on its executor
        +-- step_attempt          each fused follower's own attempt (`actors.group`)
        +-- export                a file or table export published

The trigger and run spans carry the run's parameter values (`etl.param.<name>`). An
attempt's span carries the executor, the attempt number, its outcome and its step's
records in/out/rejected when it ended, read back from the committed rows. Without an SDK in
the process every span is the API's no-op and nothing is read for them."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg2
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)

from actors.leases import Claim
from actors.sql import TRACING_QUERIES
from dag import AttemptOutcome, RunStatus
from ddl import Cursor

log = logging.getLogger("etl.tracing")

# Attempt outcomes and run statuses that mark their span as an error.
_FAILED_OUTCOMES = {AttemptOutcome.FAILED, AttemptOutcome.INPUT_ERROR, AttemptOutcome.TIMEOUT}


def engine_tracer() -> Tracer:
    """The tracer of the engine's spans: the process's provider (no-op without an SDK)."""
    return trace.get_tracer("etl.engine")


def tracing_on() -> bool:
    """True when the process has an SDK installed: only then are rows read for spans."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def param_attributes(params: Mapping[str, Any] | None) -> dict[str, str | int]:
    """A run's parameter values as span attributes, `etl.param.<name>` each (a string's or
    a date's text, an int's integer): on its trigger span and its run span."""
    return {
        f"etl.param.{name}": value if isinstance(value, int) else str(value)
        for name, value in (params or {}).items()
    }


def run_context(
    trace_id: str, parent_span_id: str | None, sampled: bool = True
) -> otel_context.Context:
    """The context a run's spans are children of: its trigger span as a remote parent. A
    run without such ids (not W3C hex) gets an empty context: its spans start a trace."""
    try:
        span = SpanContext(
            int(trace_id, 16),
            int(parent_span_id or "", 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT),
        )
    except ValueError:
        return otel_context.Context()
    if not span.is_valid:
        return otel_context.Context()
    return trace.set_span_in_context(NonRecordingSpan(span))


def _ns(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1_000_000_000)


class AttemptSpans:
    """The spans of one executor attempt: the claimed step's (`head`), its fused followers'
    (children of the head's, `adopt`) and their exports (`export`). `end` closes them all
    with what the committed rows say."""

    def __init__(self, claim: Claim, executor: str, tracer: Tracer | None = None):
        self._tracer = tracer or engine_tracer()
        self._executor = executor
        self._claims: dict[int, Claim] = {claim.attempt_id: claim}
        parent = run_context(claim.trace_id, claim.parent_span_id, claim.trace_sampled)
        self.head = self._start(claim, parent, fused=False)
        self._spans: dict[int, Span] = {claim.attempt_id: self.head}

    def _start(self, claim: Claim, parent: otel_context.Context, *, fused: bool) -> Span:
        attributes = {
            "etl.run_id": claim.run_id,
            "etl.pipeline_id": claim.pipeline_id,
            "etl.step": claim.step_name,
            "etl.attempt": claim.number,
            "etl.attempt_id": claim.attempt_id,
            "etl.executor": self._executor,
            "etl.fused": fused,
        }
        return self._tracer.start_span(
            "step_attempt", context=parent, kind=SpanKind.CONSUMER, attributes=attributes
        )

    @contextmanager
    def current(self) -> Iterator[Span]:
        """The head's span as the current one (log lines carry its ids); not ended here."""
        with trace.use_span(self.head, end_on_exit=False):
            yield self.head

    def adopt(self, claims: Iterable[Claim]) -> None:
        """Spans for fused followers not seen before, children of the head's span."""
        parent = trace.set_span_in_context(self.head)
        for claim in claims:
            if claim.attempt_id not in self._spans:
                self._claims[claim.attempt_id] = claim
                self._spans[claim.attempt_id] = self._start(claim, parent, fused=True)

    @contextmanager
    def export(self, claim: Claim, target: str, records: int) -> Iterator[Span]:
        """The span of publishing a step's export (`target`: file or table), a child of the
        step's attempt span and current while it runs; the caller adds the location."""
        parent = trace.set_span_in_context(self._spans.get(claim.attempt_id, self.head))
        attributes = {
            "etl.run_id": claim.run_id,
            "etl.step": claim.step_name,
            "etl.export.target": target,
            "etl.records": records,
        }
        with self._tracer.start_as_current_span(
            "export", context=parent, attributes=attributes
        ) as span:
            yield span

    def end(self, conn: Any, outcome: str | None) -> None:
        """End every span: the outcome (`outcome` for the head when its row has none, e.g.
        its lease was lost), error, finish time and the step's counters of each attempt's
        row, read on `conn` when the spans record. A database that does not answer ends
        them with what is known."""
        ends: dict[int, dict] = {}
        if (
            conn is not None
            and not conn.closed
            and any(s.is_recording() for s in self._spans.values())
        ):
            try:
                with conn.cursor(cursor_factory=Cursor) as cur:
                    cur.execute(
                        TRACING_QUERIES["get_attempt_ends"], {"attempt_ids": list(self._spans)}
                    )
                    ends = {row["id"]: row for row in cur.fetchall()}
                conn.rollback()
            except psycopg2.Error as exc:
                log.warning("attempt spans end without their rows: %s", exc)
                _rollback(conn)
        head_id = next(iter(self._spans))
        for attempt_id, span in self._spans.items():
            row = ends.get(attempt_id, {})
            got = row.get("outcome") or (outcome if attempt_id == head_id else None)
            got = got or "lease_lost"
            if span.is_recording():
                span.set_attribute("etl.outcome", got)
                for column in ("records_in", "records_out", "rejected"):
                    if row.get(column) is not None:
                        span.set_attribute(f"etl.{column}", int(row[column]))
                if got in _FAILED_OUTCOMES:
                    span.set_status(Status(StatusCode.ERROR, row.get("error") or got))
            span.end(end_time=_end_time(span, row.get("finished_at")))


def _end_time(span: Span, finished_at: datetime | None) -> int | None:
    """The row's finish time, never before the span's start (clocks of two hosts)."""
    end = _ns(finished_at)
    start = getattr(span, "start_time", None)
    if end is None or start is None:
        return None
    return max(end, start)


def record_run_spans(conn: Any, run_ids: Iterable[str]) -> None:
    """Emit the span of each finished run in `run_ids` (after the COMMIT that ended them):
    queued -> ended with the run's own times, a child of its trigger span, a `started`
    event when it started. Does nothing without an SDK; a database error only logs."""
    ids = [str(r) for r in run_ids]
    if not ids or not tracing_on():
        return
    try:
        with conn.cursor(cursor_factory=Cursor) as cur:
            cur.execute(TRACING_QUERIES["get_run_ends"], {"run_ids": ids})
            rows = cur.fetchall()
        conn.rollback()
    except psycopg2.Error as exc:
        log.warning("run spans not recorded: %s", exc)
        _rollback(conn)
        return
    tracer = engine_tracer()
    for run in rows:
        parent = run_context(run["trace_id"], run["parent_span_id"], run["trace_sampled"])
        attributes = {
            "etl.run_id": str(run["id"]),
            "etl.pipeline_id": str(run["pipeline_id"]),
            "etl.pipeline": run["pipeline_name"],
            "etl.revision": run["revision"],
            "etl.trigger_key": run["trigger_key"],
            "etl.status": run["status"],
            **param_attributes(run["params"]),
        }
        span = tracer.start_span(
            "run",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(run["created_at"]),
        )
        if run["started_at"] is not None:
            span.add_event("started", timestamp=_ns(run["started_at"]))
        if run["status"] == RunStatus.FAILED:
            span.set_status(Status(StatusCode.ERROR, run["error"] or "run failed"))
        span.end(end_time=_ns(run["finished_at"]))


def _rollback(conn: Any) -> None:
    try:
        conn.rollback()
    except psycopg2.Error:
        pass  # a session that is gone has nothing to roll back
