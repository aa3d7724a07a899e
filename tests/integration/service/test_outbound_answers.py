"""A lineage and OTLP endpoint that answers every POST with 1 GiB (generated as it is sent)
does not blow up the processes that post to it: the coordinator, an executor and the API's
gunicorn worker each stay far below what reading the answers would take (they read 64 KiB
of each and hang up). Peak RSS is each process's own high-water mark (`VmHWM`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from drills import Stack
from drills.topology import role_of, session_processes
from service.tracing import SERVICE_NAMES
from tests.integration.endpoints import HostileEndpoint

MIB = 1 << 20
PEAK_LIMIT = 400 * MIB  # each process; reading one whole answer takes over 1 GiB
PLAN = {
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "people.csv", "columns": {"id": "int"}}},
        {"name": "to_file", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "people.jsonl"}},
    ],
}  # fmt: skip


@pytest.fixture
def endpoint() -> Iterator[HostileEndpoint]:
    huge = HostileEndpoint("huge")
    yield huge
    huge.close()


def _services(endpoint: HostileEndpoint) -> set[str]:
    """The `service.name`s of the processes whose spans came."""
    with endpoint.lock:
        bodies = [body for path, body in endpoint.posts if path == "/v1/traces"]
    return {
        a.value.string_value
        for body in bodies
        for spans in ExportTraceServiceRequest.FromString(body).resource_spans
        for a in spans.resource.attributes
        if a.key == "service.name"
    }


def _lineage_jobs(endpoint: HostileEndpoint) -> set[str]:
    with endpoint.lock:
        posts = [body for path, body in endpoint.posts if path == "/api/v1/lineage"]
    return {json.loads(body)["job"]["name"] for body in posts}


def _peak_rss(stack: Stack) -> dict[str, int]:
    """Peak RSS (bytes) of every live process of the stack, by role."""
    peaks: dict[str, int] = {}
    for proc in stack.procs.values():
        found = session_processes(proc.pid)
        for pid, (ppid, argv) in found.items():
            parent = [] if pid == proc.pid else found.get(ppid, (0, None))[1]
            status = Path(f"/proc/{pid}/status").read_text()
            hwm = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
            peaks[role_of(argv, parent)] = int(hwm.split()[1]) * 1024
    return peaks


def test_huge_answers_of_lineage_and_otlp_endpoints_are_not_read(
    stack_factory: Callable[..., Stack], endpoint: HostileEndpoint
) -> None:
    env = {
        "OPENLINEAGE_URL": endpoint.url,
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint.url,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "ETL_API_WORKERS": "1",
    }
    people = "id,name\n" + "".join(f"{i},p{i}\n" for i in range(1, 101))
    stack = stack_factory(env=env, files={"people.csv": people})
    stack.start(executors=("executor-1",))
    run = stack.wait_run(stack.trigger(stack.create("huge_answers", PLAN))[1]["id"])
    assert run["status"] == "succeeded"

    def everyone_answered() -> bool:
        with endpoint.lock:
            all_ended = len(endpoint.sent) == len(endpoint.posts)
        return (
            set(SERVICE_NAMES.values()) <= _services(endpoint)
            and {"huge_answers", "huge_answers.read"} <= _lineage_jobs(endpoint)
            and all_ended
        )

    stack.wait_for(everyone_answered, timeout=180, what="every process's posts answered")
    peaks = _peak_rss(stack)
    figures = {role: f"{peak / MIB:.0f} MiB" for role, peak in sorted(peaks.items())}
    print(f"peak RSS with 1 GiB answers: {figures}; answers taken: {len(endpoint.sent)}")
    for role in ("coordinator", "executor-1", "gunicorn worker"):
        assert peaks[role] < PEAK_LIMIT, figures
    assert max(endpoint.sent) < 64 * MIB  # what socket buffers hold, never the whole GiB
