"""What the processes say when they start with tracing and lineage on: one line each naming
where they send (a wrong endpoint is otherwise silent; exports fail in the background)."""

from __future__ import annotations

from collections.abc import Callable

from drills import Stack, free_port


def test_tracing_and_lineage_say_they_are_on_and_where_they_send(
    stack_factory: Callable[..., Stack],
) -> None:
    traces, lineage = free_port(), free_port()  # nothing listens: no answer is needed
    stack = stack_factory(
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{traces}",
            "OPENLINEAGE_URL": f"http://127.0.0.1:{lineage}",
        }
    ).start(executors=("executor-1",))

    def said() -> bool:
        text = stack.log_text(chars=200_000)
        return text.count("tracing on: ") >= 2 and text.count("OpenLineage on: ") >= 2

    stack.wait_for(said, timeout=60, what="the start-up lines of the coordinator and executor")
    text = stack.log_text(chars=200_000)
    assert (
        "tracing on: spans of service etl-coordinator sent over OTLP/HTTP to"
        f" http://127.0.0.1:{traces}/v1/traces"
    ) in text
    assert f"spans of service etl-executor sent over OTLP/HTTP to http://127.0.0.1:{traces}" in text
    assert (
        f"OpenLineage on: events sent by the http transport to http://127.0.0.1:{lineage}" in text
    )
