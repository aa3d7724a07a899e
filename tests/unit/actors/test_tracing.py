"""`actors.tracing` without a database: the remote parent rebuilt from a run's ids, and the
attempt spans of a fused group (children of the head's), ended with the outcome known when
the database gives nothing."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_span_id, format_trace_id

from actors.leases import Claim
from actors.tracing import AttemptSpans, run_context

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def test_the_run_context_is_its_trigger_span_as_a_remote_parent() -> None:
    ctx = trace.get_current_span(run_context(TRACE_ID, PARENT, False)).get_span_context()
    assert (format_trace_id(ctx.trace_id), format_span_id(ctx.span_id)) == (TRACE_ID, PARENT)
    assert ctx.is_remote and not ctx.trace_flags.sampled
    for trace_id, parent in ((TRACE_ID, None), ("not-hex", PARENT), ("0" * 32, PARENT)):
        assert not trace.get_current_span(run_context(trace_id, parent)).get_span_context().is_valid


def test_fused_followers_get_spans_under_the_heads() -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    head = Claim(1, "run-1", "read", 2, TRACE_ID, "p-1", PARENT, True)
    follower = Claim(2, "run-1", "clean", 1, TRACE_ID, "p-1")
    group = AttemptSpans(head, "executor-1", provider.get_tracer("t"))
    group.adopt([follower])
    group.adopt([follower])  # a take-back adopts the same group again: no second span
    with group.export(follower, "file", 3) as export:
        export.set_attribute("etl.export.location", "/x.csv")
    group.end(None, "lease_lost")
    finished = {
        s.name + ":" + s.attributes.get("etl.step", ""): s for s in spans.get_finished_spans()
    }
    assert set(finished) == {"step_attempt:read", "step_attempt:clean", "export:clean"}
    read, clean = finished["step_attempt:read"], finished["step_attempt:clean"]
    assert format_span_id(read.parent.span_id) == PARENT
    assert clean.parent.span_id == read.context.span_id
    assert finished["export:clean"].parent.span_id == clean.context.span_id
    assert (read.attributes["etl.attempt"], read.attributes["etl.executor"]) == (2, "executor-1")
    assert read.attributes["etl.outcome"] == "lease_lost"
    assert (read.attributes["etl.fused"], clean.attributes["etl.fused"]) == (False, True)
    assert {format_trace_id(s.context.trace_id) for s in finished.values()} == {TRACE_ID}
