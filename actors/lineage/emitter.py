"""The emission side of lineage: a bounded in-process queue drained by a daemon thread
that builds each event and hands it to the `openlineage-python` client.

Whoever notifies never waits and never fails: a full queue drops the notice and counts it
(`dropped`, with a warning at the 1st, 2nd, 4th, 8th, ... drop), and an event the builder or
the transport fails on is logged and counted (`failed`). The transport is whatever the
client's own configuration says (`OPENLINEAGE_URL`, `OPENLINEAGE_CONFIG`, `openlineage.yml`,
`OPENLINEAGE__TRANSPORT__*`); with none, lineage is off: `configured_client` answers None
instead of the client's console fallback. An HTTP transport reads at most 64 KiB of an
answer, within 10 s (`connectors.http_answers`)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import urllib3
from openlineage.client import OpenLineageClient
from openlineage.client.transport.http import HttpTransport

from connectors import BoundedAnswers, bounded_session

log = logging.getLogger("etl.lineage")
MAX_QUEUED = 10_000  # notices
_STOP = object()


def configured_client() -> OpenLineageClient | None:
    """The client as its own configuration makes it, or None when that configures nothing
    (or `OPENLINEAGE_DISABLED=true`): lineage is off unless asked for, and a console
    transport only when configured as one, never as the client's fallback."""
    client_log = logging.getLogger("openlineage.client.client")
    level = client_log.level
    client_log.setLevel(logging.ERROR)  # not its "will print events to console" warning
    try:
        client = OpenLineageClient()
    finally:
        client_log.setLevel(level)
    kind = client.transport.kind
    asked = (client.config.transport or {}).get("type")
    if kind == "noop" or (kind == "console" and asked != "console"):
        return None
    bound_answers(client.transport)
    return client


def bound_answers(transport: Any) -> None:
    """Make an HTTP transport (or each of a composite's) read at most a bounded part of
    every answer, in bounded time (`connectors.BoundedAnswers`; its own retries kept)."""
    for inner in getattr(transport, "transports", None) or []:
        bound_answers(inner)
    if isinstance(transport, HttpTransport):
        retry = urllib3.util.Retry(**transport.config.retry)
        transport.config.adapter = BoundedAnswers(max_retries=retry)  # mounted for its URL
        transport.session = bounded_session()


class LineageEmitter:
    """Builds and emits events from notices on a daemon thread of its own."""

    def __init__(
        self,
        client: Any,
        build: Callable[[Any], Any],
        *,
        max_queued: int = MAX_QUEUED,
        name: str = "lineage",
    ) -> None:
        self._client = client
        self._build = build
        self._queue: queue.Queue = queue.Queue(maxsize=max_queued)
        self._lock = threading.Lock()
        self.dropped = 0  # notices a full queue turned away
        self.failed = 0  # events not built or not accepted by the transport
        self.emitted = 0
        self._thread = threading.Thread(target=self._drain, name=name, daemon=True)

    def start(self) -> LineageEmitter:
        self._thread.start()
        return self

    def notify(self, notice: Any) -> bool:
        """Queue `notice` without waiting; False (counted in `dropped`) when the queue is
        full."""
        try:
            self._queue.put_nowait(notice)
        except queue.Full:
            with self._lock:
                self.dropped += 1
                n = self.dropped
            if n & (n - 1) == 0:
                log.warning("lineage queue full: %d event(s) dropped so far", n)
            return False
        return True

    def _drain(self) -> None:
        while True:
            notice = self._queue.get()
            if notice is _STOP:
                return
            try:
                event = self._build(notice)
                if event is not None:
                    self._client.emit(event)
                    self.emitted += 1
            except Exception as exc:  # lineage must never take a process down
                self.failed += 1
                log.warning("lineage event not emitted: %s: %s", type(exc).__name__, exc)

    def close(self, timeout_s: float = 5.0) -> bool:
        """Emit what is queued, then close the transport, within `timeout_s` in all (an
        endpoint that does not answer must not hold a stopping process); True when
        everything queued went out."""
        deadline = time.monotonic() + timeout_s
        try:
            self._queue.put(_STOP, timeout=timeout_s)
        except queue.Full:
            return False
        self._thread.join(max(0.0, deadline - time.monotonic()))
        done = not self._thread.is_alive()
        try:
            self._client.close(max(0.1, deadline - time.monotonic()))
        except Exception as exc:
            log.warning("lineage transport not closed: %s", exc)
        return done
