"""Tracing through a real topology (docs/tracing.md): with OTEL_EXPORTER_OTLP_ENDPOINT set, the
API, the coordinator and the executors export their spans over OTLP/HTTP to a real receiver
on loopback in this process (it decodes `ExportTraceServiceRequest` protobuf): the trigger,
the run, every step attempt (fused followers included) and the exports, all in the
traceparent's trace with the right parents. The run's log lines carry the same ids. Without
the variables nothing is sent."""

from __future__ import annotations

import gzip
import json
import threading
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from actors import build_broker, sweep_once
from drills import ADMIN_TOKEN, Stack

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
PEOPLE = "id,name,amount,country\n1,  Ann ,5,DE\n2,Bob,x,FR\n3,Cy,7,DE\n4,Di,2,FR\n"
PLAN = {
    "on_row_error": "reject",
    "params": {"country": {"type": "string", "default": "DE"}},
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "people.csv",
                    "columns": {"id": "int", "amount": "int"}}},
        {"name": "clean", "type": "transform", "depends_on": ["read"],
         "config": {"op": "normalize_whitespace", "columns": ["name"]}},
        {"name": "to_table", "type": "export", "depends_on": ["clean"],
         "config": {"target": "table", "table": "traced_people", "key": "id"}},
        {"name": "by_country", "type": "transform", "depends_on": ["clean"],
         "config": {"op": "aggregate", "column": "amount", "group_by": ["country"]}},
        {"name": "by_country_to_file", "type": "export", "depends_on": ["by_country"],
         "config": {"target": "file", "path": "by_country.csv", "format": "csv"}},
    ],
}  # fmt: skip


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: every span it was sent, flattened to dicts
    (`name`, `trace_id`, `span_id`, `parent`, `service`, `attributes`, `start`, `end`)."""

    def __init__(self, port: int = 0):
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                receiver.take(self.path, request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def take(self, path: str, request: ExportTraceServiceRequest) -> None:
        assert path == "/v1/traces", path
        spans = []
        for resource_spans in request.resource_spans:
            service = _attributes(resource_spans.resource.attributes).get("service.name")
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    spans.append(
                        {
                            "name": s.name,
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent": s.parent_span_id.hex() or None,
                            "service": service,
                            "attributes": _attributes(s.attributes),
                            "events": [e.name for e in s.events],
                            "start": s.start_time_unix_nano,
                            "end": s.end_time_unix_nano,
                            "error": s.status.code == s.status.STATUS_CODE_ERROR,
                        }
                    )
        with self._lock:
            self.requests += 1
            self.spans.extend(spans)

    def named(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [s for s in self.spans if s["name"] == name]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _attributes(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in pairs:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind) if kind else None
    return out


@pytest.fixture
def receiver_factory() -> Iterator[Callable[..., Receiver]]:
    made: list[Receiver] = []

    def make(port: int = 0) -> Receiver:
        made.append(Receiver(port))
        return made[-1]

    yield make
    for r in made:
        r.close()


def _trigger(stack: Stack, pipeline_id: str, traceparent: str) -> tuple[int, dict, str | None]:
    """POST a trigger with a `traceparent`: (status, run, the answer's traceparent)."""
    request = urllib.request.Request(
        stack.api.url(f"/pipelines/{pipeline_id}/runs"),
        data=b"{}",
        method="POST",
        headers={
            "Authorization": f"Bearer {ADMIN_TOKEN}",
            "Content-Type": "application/json",
            "traceparent": traceparent,
        },
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        return resp.status, json.loads(resp.read()), resp.headers.get("traceparent")


def _log_lines(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    lines = []
    for path in stack.logs.values():
        for text in path.read_text(errors="replace").splitlines():
            if text.startswith("{"):
                entry = json.loads(text)
                if entry.get("run_id") == run_id:
                    lines.append(entry)
    return lines


def test_a_run_exports_its_spans_in_the_callers_trace(
    stack_factory: Callable[..., Stack], receiver_factory: Callable[..., Receiver]
) -> None:
    receiver = receiver_factory()
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms: export soon after a span ends
    }
    stack = stack_factory(env=env, files={"people.csv": PEOPLE}).start()
    pid = stack.create("traced", PLAN)
    status, run, answer = _trigger(stack, pid, f"00-{TRACE_ID}-{CALLER_SPAN}-01")
    assert status == 201 and run["trace_id"] == TRACE_ID
    done = stack.wait_run(run["id"], timeout=120)
    assert done["status"] == "succeeded", done
    expected_attempts = {s["name"] for s in PLAN["steps"]}

    def complete() -> bool:
        attempts = {s["attributes"]["etl.step"] for s in receiver.named("step_attempt")}
        return (
            bool(receiver.named("run"))
            and attempts == expected_attempts
            and (len(receiver.named("export")) == 2)
        )

    stack.wait_for(complete, timeout=30, what="every span at the receiver")
    spans = receiver.spans
    assert {s["trace_id"] for s in spans} == {TRACE_ID}

    (trigger,) = receiver.named("trigger_run")
    assert trigger["parent"] == CALLER_SPAN and trigger["service"] == "etl-api"
    assert answer == f"00-{TRACE_ID}-{trigger['span_id']}-01"
    assert trigger["attributes"]["etl.run_id"] == run["id"]
    assert trigger["attributes"]["etl.param.country"] == "DE"

    (run_span,) = receiver.named("run")
    assert run_span["parent"] == trigger["span_id"] and run_span["service"] == "etl-coordinator"
    assert run_span["attributes"]["etl.status"] == "succeeded"
    assert run_span["attributes"]["etl.pipeline"] == "traced"
    params = {k: v for k, v in run_span["attributes"].items() if k.startswith("etl.param.")}
    assert params == {"etl.param.country": "DE", "etl.param.run_id": run["id"]}
    assert run_span["events"] == ["started"] and run_span["start"] < run_span["end"]

    attempts = {s["attributes"]["etl.step"]: s for s in receiver.named("step_attempt")}
    assert len(receiver.named("step_attempt")) == len(PLAN["steps"])  # one attempt each
    steps = {s["name"]: s for s in done["steps"]}
    for name, span in attempts.items():
        a = span["attributes"]
        (attempt,) = steps[name]["attempts"]
        assert span["service"] == "etl-executor"
        assert (a["etl.attempt"], a["etl.outcome"], a["etl.run_id"]) == (1, "succeeded", run["id"])
        assert a["etl.executor"] == attempt["executor"].split(":")[0]
        assert (a["etl.records_in"], a["etl.records_out"], a["etl.rejected"]) == (
            steps[name]["records_in"],
            steps[name]["records_out"],
            steps[name]["rejected"],
        )
    assert (
        attempts["read"]["attributes"]["etl.records_in"],
        attempts["read"]["attributes"]["etl.rejected"],
    ) == (4, 1)
    # the read's attempt ran clean, to_table and by_country fused in its pass: their attempt
    # spans are its children; by_country_to_file reads the aggregate later, on its own
    head = attempts["read"]
    assert head["parent"] == trigger["span_id"] and head["attributes"]["etl.fused"] is False
    for name in ("clean", "to_table", "by_country"):
        assert attempts[name]["parent"] == head["span_id"], name
        assert attempts[name]["attributes"]["etl.fused"] is True
    assert attempts["by_country_to_file"]["parent"] == trigger["span_id"]

    exports = {s["attributes"]["etl.step"]: s for s in receiver.named("export")}
    assert exports["to_table"]["parent"] == attempts["to_table"]["span_id"]
    assert exports["to_table"]["attributes"]["etl.export.target"] == "table"
    assert exports["to_table"]["attributes"]["etl.export.location"] == "sandbox.traced_people"
    assert exports["by_country_to_file"]["parent"] == attempts["by_country_to_file"]["span_id"]
    assert exports["by_country_to_file"]["attributes"]["etl.export.target"] == "file"
    assert exports["by_country_to_file"]["attributes"]["etl.records"] == 2

    # the run's log lines carry its trace id; an executor's, the span id of its attempt
    lines = _log_lines(stack, run["id"])
    assert lines and {e["trace_id"] for e in lines} == {TRACE_ID}
    claimed = {e["step"]: e["span_id"] for e in lines if e["message"] == "attempt claimed"}
    assert claimed == {
        "read": head["span_id"],
        "by_country_to_file": attempts["by_country_to_file"]["span_id"],
    }
    published = [e for e in lines if e["message"].startswith("export published")]
    assert {e["span_id"] for e in published} == {s["span_id"] for s in exports.values()}


def test_without_the_variables_nothing_is_sent(
    stack_factory: Callable[..., Stack], receiver_factory: Callable[..., Receiver]
) -> None:
    # on the OTLP/HTTP default port: where an SDK set up anyway would send its spans
    receiver = receiver_factory(4318)
    stack = stack_factory(
        env={"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "untraced"},
        files={"people.csv": PEOPLE},
    ).start()
    pid = stack.create("untraced", PLAN)
    status, run, answer = _trigger(stack, pid, f"00-{TRACE_ID}-{CALLER_SPAN}-01")
    assert status == 201 and run["trace_id"] == TRACE_ID
    assert answer == f"00-{TRACE_ID}-{CALLER_SPAN}-01"  # no span of ours: the caller's
    done = stack.wait_run(run["id"], timeout=120)
    assert done["status"] == "succeeded", done
    stack.stop()  # every process flushes what it has at exit
    assert receiver.requests == 0 and receiver.spans == []
    # the log lines still carry the run's trace id
    lines = _log_lines(stack, run["id"])
    assert lines and {e["trace_id"] for e in lines} == {TRACE_ID}


def test_a_run_the_sweep_starts_logs_its_trace_id(api, conn, caplog) -> None:
    """The sweep advances what no wake-up advanced: a queued run it starts says so in a log
    line that carries the run's trace id, as every line of a run does."""
    run = api.trigger(api.create_pipeline(), "k").body
    broker = build_broker(api.db_url, max_connections=2)
    try:
        with caplog.at_level("INFO", logger="etl.sweep"):
            sweep_once(conn, broker, unclaimed_after_s=3600)
    finally:
        broker.close()
    started = [r for r in caplog.records if r.getMessage() == "run started"]
    assert [(r.run_id, getattr(r, "trace_id", None)) for r in started] == [
        (run["id"], run["trace_id"])
    ]
