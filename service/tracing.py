"""Tracing of the coordinator side (docs/tracing.md): the OpenTelemetry SDK of a process, set
up only when OTLP export is configured, and the trigger span a run's trace hangs off.

A trigger (`POST /pipelines/{id}/runs`, a schedule fire, the console's button) runs inside a
trigger span whose parent is the caller's W3C `traceparent` when it sent a valid one (a
malformed one is ignored, as W3C asks, and the trigger starts a new trace). The run keeps
that trace id and the trigger span's id (`RunTrace`): the executors and the dag-advancer
parent their spans to it later, in other processes, and every answer about the run carries
it as `traceparent`. Without an SDK the span records nothing and the ids are still decided
here, so a run's trace id never depends on whether tracing is on."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import (
    Span,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    format_span_id,
    format_trace_id,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
# Each process kind's `service.name` unless OTEL_SERVICE_NAME says otherwise.
SERVICE_NAMES = {"api": "etl-api", "coordinator": "etl-coordinator", "executor": "etl-executor"}
_PROPAGATOR = TraceContextTextMapPropagator()

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("etl.tracing")


@dataclass(frozen=True)
class RunTrace:
    """The trace a run belongs to: its trace id (32 lowercase hex), the id of the span its
    own spans are children of (the trigger span, 16 lowercase hex) and the W3C sampled flag."""

    trace_id: str
    span_id: str
    sampled: bool = True

    @property
    def traceparent(self) -> str:
        """The W3C `traceparent` header naming the trigger span."""
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"

    @classmethod
    def new(cls, new_id: Callable[[], uuid.UUID] = uuid.uuid4) -> RunTrace:
        """A trace of its own, for a run made where no span was: a random trace id and, as
        the stand-in id of its parent, the trace id's low half (as migration 0012 gave the
        runs made before it)."""
        trace_id = new_id().hex
        low = trace_id[16:]
        return cls(trace_id, low if low.strip("0") else "0000000000000001")

    @classmethod
    def of_run(cls, run: Mapping[str, Any]) -> RunTrace | None:
        """A run row's trace; None when it has no parent span id (not a W3C trace id)."""
        if not run.get("parent_span_id"):
            return None
        return cls(run["trace_id"], run["parent_span_id"], bool(run.get("trace_sampled", True)))


@dataclass
class Trigger:
    """A trigger's span (recording or not) and the trace its run gets (None: no span is
    there to hang off, the run starts a trace of its own, `RunTrace.new`)."""

    span: Span
    run_trace: RunTrace | None


@contextmanager
def trigger_span(
    tracer: Tracer,
    name: str,
    *,
    traceparent: str | None = None,
    tracestate: str | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Trigger]:
    """The span of a trigger named `name`, current while the block runs (a server span, its
    parent the caller's `traceparent` if valid). An exception in the block is recorded on it,
    and makes it an error unless it is a refusal of the caller's request (a status < 500).

    The run's trace: with an SDK, this span's ids; without one, the caller's span (its
    trace goes on, and the run's spans of processes that do trace hang off it), or None
    when there is no caller's span either."""
    carrier = {TRACEPARENT: traceparent or "", TRACESTATE: tracestate or ""}
    parent = _PROPAGATOR.extract(carrier)
    incoming = trace.get_current_span(parent).get_span_context()
    with tracer.start_as_current_span(
        name,
        context=parent,
        kind=SpanKind.SERVER,
        attributes=dict(attributes or {}),
        set_status_on_exception=False,
    ) as span:
        own = span.get_span_context()
        if own.is_valid and own.span_id != incoming.span_id:  # a span of an SDK
            ids = RunTrace(
                format_trace_id(own.trace_id), format_span_id(own.span_id), own.trace_flags.sampled
            )
        elif incoming.is_valid:  # no SDK: the run hangs off the caller's span
            ids = RunTrace(
                format_trace_id(incoming.trace_id),
                format_span_id(incoming.span_id),
                incoming.trace_flags.sampled,
            )
        else:
            ids = None
        try:
            yield Trigger(span, ids)
        except Exception as exc:
            # a refusal the caller gets to fix (404, 409, ...) is no error of the server's
            # (the exception is recorded on the span either way)
            if getattr(exc, "status", 500) >= 500:
                span.set_status(Status(StatusCode.ERROR, str(exc)))
            raise


def setup_tracing(
    process: str, *, enabled: bool, service_name: str | None = None
) -> TracerProvider | None:
    """Install the SDK for this process when `enabled` (an OTLP endpoint is configured): a
    tracer provider named `service_name` (default: the process kind's, `SERVICE_NAMES`)
    whose batch processor exports over OTLP/HTTP (protobuf) to where the standard
    `OTEL_EXPORTER_OTLP_*` variables say. Returns the provider (`shutdown_tracing` flushes
    it), or None: then nothing is installed and every span is the API's no-op."""
    if not enabled:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from connectors import bounded_session

    name = service_name or SERVICE_NAMES.get(process, f"etl-{process}")
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    # a collector's answer is read to 64 KiB, within 10 s: never a whole huge body
    exporter = OTLPSpanExporter(session=bounded_session())
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    # said once at start: a wrong endpoint is otherwise silent (exports fail in the background)
    where = getattr(exporter, "_endpoint", "the OTEL_EXPORTER_OTLP_* endpoint")
    log.info("tracing on: spans of service %s sent over OTLP/HTTP to %s", name, where)
    return provider


def shutdown_tracing(provider: TracerProvider | None) -> None:
    """Export what is left and stop the exporter (a no-op for None)."""
    if provider is not None:
        provider.shutdown()
