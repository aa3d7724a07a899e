"""`service.tracing` without a database: when OTLP export is on, the run's trace decided by a
trigger (with and without an SDK, a valid, malformed or missing `traceparent`), and log lines
carrying the current span's ids."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracer, format_span_id, format_trace_id

from service.config import Config
from service.logs import JsonFormatter
from service.tracing import RunTrace, setup_tracing, trigger_span

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
    ],
)
def test_otlp_export_is_on_only_with_an_endpoint(env: dict[str, str], on: bool) -> None:
    assert Config.from_env(env).tracing is on


def test_without_an_endpoint_no_sdk_is_set_up() -> None:
    assert setup_tracing("api", enabled=False) is None


def _sdk() -> tuple[TracerProvider, InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return provider, spans


def test_with_an_sdk_the_run_hangs_off_the_trigger_span() -> None:
    provider, spans = _sdk()
    header = f"00-{TRACE_ID}-{CALLER_SPAN}-01"
    with trigger_span(provider.get_tracer("t"), "trigger_run", traceparent=header) as trigger:
        pass
    (span,) = spans.get_finished_spans()
    own = format_span_id(span.get_span_context().span_id)
    assert trigger.run_trace == RunTrace(TRACE_ID, own, True)
    assert trigger.run_trace.traceparent == f"00-{TRACE_ID}-{own}-01"
    assert format_span_id(span.parent.span_id) == CALLER_SPAN


def test_without_an_sdk_the_run_hangs_off_the_callers_span() -> None:
    header = f"00-{TRACE_ID}-{CALLER_SPAN}-00"
    with trigger_span(NoOpTracer(), "trigger_run", traceparent=header) as trigger:
        pass
    assert trigger.run_trace == RunTrace(TRACE_ID, CALLER_SPAN, False)
    with trigger_span(NoOpTracer(), "trigger_run", traceparent="00-nonsense") as trigger:
        pass
    assert trigger.run_trace is None  # the run makes a trace of its own


def test_a_new_trace_has_its_trace_ids_low_half_as_parent() -> None:
    u = uuid.UUID("12345678123456781234567812345678")
    assert RunTrace.new(lambda: u) == RunTrace(u.hex, u.hex[16:], True)
    zero_low = uuid.UUID("12345678123456780000000000000000")
    assert RunTrace.new(lambda: zero_low).span_id == "0000000000000001"
    assert RunTrace.of_run({"trace_id": TRACE_ID, "parent_span_id": None}) is None
    assert RunTrace.of_run(
        {"trace_id": TRACE_ID, "parent_span_id": CALLER_SPAN, "trace_sampled": False}
    ) == RunTrace(TRACE_ID, CALLER_SPAN, False)


def test_a_log_line_inside_a_span_carries_its_ids() -> None:
    provider, _ = _sdk()
    formatter = JsonFormatter("test")

    def line(**extra: str) -> dict:
        record = logging.LogRecord("t", logging.INFO, __file__, 1, "hello", None, None)
        for k, v in extra.items():
            setattr(record, k, v)
        return json.loads(formatter.format(record))

    assert "trace_id" not in line() and "span_id" not in line()
    assert line(trace_id=TRACE_ID)["trace_id"] == TRACE_ID
    with provider.get_tracer("t").start_as_current_span("s") as span:
        entry = line(run_id="r")
    ctx = span.get_span_context()
    assert entry["trace_id"] == format_trace_id(ctx.trace_id)
    assert entry["span_id"] == format_span_id(ctx.span_id)
    assert entry["run_id"] == "r"
