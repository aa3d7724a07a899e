"""Tracing of a trigger in process (docs/tracing.md): a W3C `traceparent` makes the run's trace
id, the trigger span (read from the SDK's in-memory exporter) is a child of the caller's
span, and every answer about the run carries the run's `traceparent`. A malformed header is
ignored; without an SDK the ids are the same rules' minus the span."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, format_span_id, format_trace_id

from service.api.openapi.spec import build_spec
from service.api.routes import ROUTES
from tests.integration.testapp import Api

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def traced(app_factory: Callable[..., Api], spans: InMemorySpanExporter) -> Api:
    """The app with an SDK of its own whose spans land in `spans`."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return app_factory(tracer=provider.get_tracer("test"))


def _trigger(api: Api, pid: str, headers: dict[str, str], key: str | None = None):
    body = {"trigger_key": key} if key else {}
    return api.call("POST", f"/pipelines/{pid}/runs", body, headers=headers)


def test_a_traceparent_makes_the_run_trace_and_parents_the_trigger_span(
    traced: Api, spans: InMemorySpanExporter
) -> None:
    pid = traced.create_pipeline()
    a = _trigger(traced, pid, {"traceparent": TRACEPARENT})
    assert a.status == 201, a.body
    run = a.body
    assert run["trace_id"] == TRACE_ID and a.headers["x-trace-id"] == TRACE_ID

    (span,) = [s for s in spans.get_finished_spans() if s.name == "trigger_run"]
    ctx = span.get_span_context()
    assert format_trace_id(ctx.trace_id) == TRACE_ID
    assert span.parent is not None and span.parent.is_remote
    assert format_span_id(span.parent.span_id) == CALLER_SPAN
    assert span.kind == SpanKind.SERVER
    assert span.attributes["etl.run_id"] == run["id"]
    assert span.attributes["etl.pipeline_id"] == pid
    assert span.attributes["etl.admission"] == "created"
    assert span.attributes["http.response.status_code"] == 201
    answer = f"00-{TRACE_ID}-{format_span_id(ctx.span_id)}-01"
    assert a.headers["traceparent"] == answer
    # the run keeps the trigger span as the parent of its spans in other processes
    assert traced.sql(
        "SELECT trace_id, parent_span_id, trace_sampled FROM runs WHERE id = %s", (run["id"],)
    ) == [(TRACE_ID, format_span_id(ctx.span_id), True)]
    # every answer about the run says the same
    got = traced.call("GET", f"/runs/{run['id']}")
    assert got.headers["traceparent"] == answer
    canceled = traced.call("POST", f"/runs/{run['id']}/cancel")
    assert canceled.status == 202 and canceled.headers["traceparent"] == answer


def test_a_repeated_key_answers_the_first_runs_trace(
    traced: Api, spans: InMemorySpanExporter
) -> None:
    pid = traced.create_pipeline()
    first = _trigger(traced, pid, {"traceparent": TRACEPARENT}, key="k-1")
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    again = _trigger(traced, pid, {"traceparent": other}, key="k-1")
    assert again.status == 200 and again.body["id"] == first.body["id"]
    assert again.body["trace_id"] == TRACE_ID
    assert again.headers["traceparent"] == first.headers["traceparent"]
    second = [s for s in spans.get_finished_spans() if s.name == "trigger_run"][1]
    assert second.attributes["etl.admission"] == "existing"
    assert format_trace_id(second.get_span_context().trace_id) == other.split("-")[1]


@pytest.mark.parametrize(
    "header",
    [
        "garbage",
        f"00-{TRACE_ID}-{CALLER_SPAN}",  # no flags
        f"00-{'0' * 32}-{CALLER_SPAN}-01",  # the invalid trace id
        f"00-{TRACE_ID}-{'0' * 16}-01",  # the invalid span id
        f"ff-{TRACE_ID}-{CALLER_SPAN}-01",  # the forbidden version
        f"00-{TRACE_ID.upper()}-{CALLER_SPAN}-01",  # upper case
    ],
)
def test_a_malformed_traceparent_is_ignored_and_the_run_starts_a_trace(
    traced: Api, spans: InMemorySpanExporter, header: str
) -> None:
    pid = traced.create_pipeline()
    a = _trigger(traced, pid, {"traceparent": header})
    assert a.status == 201, a.body
    (span,) = [s for s in spans.get_finished_spans() if s.name == "trigger_run"]
    assert span.parent is None  # a root: a new trace
    trace_id = format_trace_id(span.get_span_context().trace_id)
    assert a.body["trace_id"] == trace_id != TRACE_ID
    assert a.headers["traceparent"] == (
        f"00-{trace_id}-{format_span_id(span.get_span_context().span_id)}-01"
    )


def test_an_unsampled_caller_gives_an_unsampled_run(
    traced: Api, spans: InMemorySpanExporter
) -> None:
    pid = traced.create_pipeline()
    a = _trigger(traced, pid, {"traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-00"})
    assert a.status == 201 and a.body["trace_id"] == TRACE_ID
    assert a.headers["traceparent"].startswith(f"00-{TRACE_ID}-")
    assert a.headers["traceparent"].endswith("-00")
    assert a.headers["traceparent"].split("-")[2] != CALLER_SPAN
    assert spans.get_finished_spans() == ()  # the SDK's parent-based sampler records nothing


def test_without_an_sdk_the_run_still_takes_the_callers_trace(api: Api) -> None:
    pid = api.create_pipeline()
    a = _trigger(api, pid, {"traceparent": TRACEPARENT})
    assert a.status == 201 and a.body["trace_id"] == TRACE_ID
    # no span of ours: the run hangs off the caller's span
    assert a.headers["traceparent"] == TRACEPARENT
    plain = api.trigger(pid)
    trace_id = plain.body["trace_id"]
    assert len(trace_id) == 32 and trace_id != TRACE_ID
    assert plain.headers["traceparent"] == f"00-{trace_id}-{trace_id[16:]}-01"


def test_the_trigger_span_records_a_refused_trigger(
    traced: Api, spans: InMemorySpanExporter
) -> None:
    a = _trigger(traced, "6f1c9e0e-0000-4000-8000-000000000000", {"traceparent": TRACEPARENT})
    assert a.status == 404 and "traceparent" not in a.headers
    (span,) = spans.get_finished_spans()
    assert span.name == "trigger_run" and span.status.is_unset  # the caller's mistake
    assert [e.name for e in span.events] == ["exception"]
    assert format_trace_id(span.get_span_context().trace_id) == TRACE_ID


def test_the_openapi_document_declares_the_traceparent() -> None:
    doc = build_spec(ROUTES)
    trigger = doc["paths"]["/api/v1/pipelines/{pipeline_id}/runs"]["post"]
    (param,) = [p for p in trigger["parameters"] if p["in"] == "header"]
    assert param["name"] == "traceparent" and param["required"] is False
    for status in ("200", "201", "429"):
        assert "traceparent" in trigger["responses"][status]["headers"]
    get_run = doc["paths"]["/api/v1/runs/{run_id}"]["get"]
    assert "traceparent" in get_run["responses"]["200"]["headers"]
    assert "headers" not in trigger["responses"]["409"]
