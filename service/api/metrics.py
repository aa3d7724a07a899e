"""`GET /metrics`: the database collector's values (`service.domain.metrics`) in the
Prometheus text format, no token."""

from __future__ import annotations

import falcon
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest

from service.domain.deps import Deps
from service.domain.metrics import DatabaseCollector

# `generate_latest` writes the classic text format (names escaped to underscores), which
# prometheus_client itself labels 0.0.4 (its CONTENT_TYPE_LATEST says 1.0.0, a format that
# allows UTF-8 names and that an older Prometheus server does not take).
METRICS_CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4


class MetricsResource:
    """`GET /metrics` (public): the collector's values in the Prometheus text format."""

    public = True

    def __init__(self, deps: Deps):
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(DatabaseCollector(deps.db))

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = METRICS_CONTENT_TYPE
        resp.data = generate_latest(self.registry)
