"""The API's request durations for `etl_api_request_duration_seconds` (docs/metrics.md):
a middleware that times every request, from the request read to the answer ready, by
method, route template and status, and adds them to the database's totals at most once a
second per process (`service.domain.processmetrics.RequestTotals`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import falcon

from service.domain.deps import Deps

NO_ROUTE = "(no route)"  # the route of a request no route template matched (a console file, a 404)


class RequestMetricsMiddleware:
    """Times each request into `deps.request_totals`; the first middleware, so the time
    includes the others (authentication, the request id)."""

    def __init__(self, deps: Deps, clock: Callable[[], float] = time.perf_counter):
        self.deps, self._clock = deps, clock

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.received_s = self._clock()

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        received = getattr(req.context, "received_s", None)
        if received is None:
            return
        route = req.uri_template or NO_ROUTE
        seconds = self._clock() - received
        self.deps.request_totals.observe(req.method, route, str(resp.status_code), seconds)
        self.deps.request_totals.add_due()
