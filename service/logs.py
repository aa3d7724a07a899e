"""JSON log lines: time, level, process, logger, message, and the run context
(run_id, step, attempt, trace_id) whenever the caller passed it in `extra`. A line logged
inside a span (a trigger, a step attempt: `service.tracing`, `actors.tracing`) carries that
span's `trace_id` and `span_id`, so a log line and its span are found by the same ids."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from opentelemetry import trace
from opentelemetry.trace import format_span_id, format_trace_id

CONTEXT_FIELDS = (
    "run_id",
    "step",
    "attempt",
    "attempt_id",
    "trace_id",
    "status",
    "pipeline_id",
    "skip_reason",  # why a schedule's fire made no run (`service.scheduler`)
)


class JsonFormatter(logging.Formatter):
    def __init__(self, process_name: str):
        super().__init__()
        self.process_name = process_name

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "process": self.process_name,
            "pid": record.process,
            "logger": record.name,
            "message": record.getMessage(),
        }
        span = trace.get_current_span().get_span_context()  # of the logging thread
        if span.is_valid:
            entry["trace_id"] = format_trace_id(span.trace_id)
            entry["span_id"] = format_span_id(span.span_id)
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry.setdefault(name, value)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(process_name: str, level: str = "INFO") -> None:
    """Send every log record to stderr as one JSON line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(process_name))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("dramatiq", "dramatiq_pg", "apscheduler"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
