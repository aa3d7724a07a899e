"""`GET /metrics`: the database collector's values (`service.domain.metrics`) in the
Prometheus text format, no token, read at most once a second per process."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import falcon
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest

from service.domain.deps import Deps
from service.domain.metrics import DatabaseCollector

# `generate_latest` writes the classic text format (names escaped to underscores), which
# prometheus_client itself labels 0.0.4 (its CONTENT_TYPE_LATEST says 1.0.0, a format that
# allows UTF-8 names and that an older Prometheus server does not take).
METRICS_CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4


class MetricsResource:
    """`GET /metrics` (public): the collector's values in the Prometheus text format.

    A body is reused for `deps.metrics_max_age_s` (1 s), and scrapes arriving while it is
    read wait for that one read: anonymous scrapers, however many, cost the database one
    read a second per process instead of slowing every API call."""

    public = True

    def __init__(self, deps: Deps, clock: Callable[[], float] = time.monotonic):
        self.deps = deps
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(DatabaseCollector(deps.db))
        self.max_age_s, self._clock = deps.metrics_max_age_s, clock
        self._lock = threading.Lock()
        self._body, self._read_at = b"", -math.inf

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._lock:
            if self.max_age_s <= 0 or self._clock() - self._read_at >= self.max_age_s:
                self.deps.request_totals.add_now()  # this process's requests, up to now
                self._body, self._read_at = generate_latest(self.registry), self._clock()
            body = self._body
        resp.content_type = METRICS_CONTENT_TYPE
        resp.data = body
