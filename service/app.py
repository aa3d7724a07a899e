"""The falcon application: the REST API (`service.api`) and the console (`service.console`) on
one app. `create_app(deps)` only registers middleware, routes and error handlers; `get_app()`
loads the configuration and builds the dependencies (gunicorn serves
`'service.app:get_app()'`, once per worker, after the fork)."""

from __future__ import annotations

import threading

import falcon

from actors.broker import build_broker, send_advance_run
from service.api.auth import AuthMiddleware
from service.api.middleware import (
    QueryGuardMiddleware,
    RequestIdMiddleware,
    handle_http_error,
    handle_service_error,
    handle_unexpected,
)
from service.api.request_metrics import RequestMetricsMiddleware
from service.api.routes import ROUTES
from service.config import Config
from service.console import ConsoleSettings, add_console
from service.domain.db import Database
from service.domain.deps import Deps
from service.domain.processmetrics import RequestTotals
from service.errors import ServiceError
from service.logs import configure_logging


def create_app(deps: Deps, console: ConsoleSettings | None = None) -> falcon.App:
    """The WSGI app on `deps`: middleware, the routes of `service.api.routes.ROUTES`, the
    console under /ui, handlers."""
    app = falcon.App(
        middleware=[
            RequestMetricsMiddleware(deps),
            RequestIdMiddleware(deps.new_id),
            QueryGuardMiddleware(),
            AuthMiddleware(deps.db, deps.penalties),
        ]
    )
    app.req_options.strip_url_path_trailing_slash = True
    for route in ROUTES:
        app.add_route(route.path, route.resource(deps))
    app.add_error_handler(Exception, handle_unexpected)
    app.add_error_handler(falcon.HTTPError, handle_http_error)
    app.add_error_handler(ServiceError, handle_service_error)
    add_console(app, deps, console or ConsoleSettings())
    return app


WAKE_SESSIONS = 2  # the broker sessions of an API worker, for the dag-advancer's wake-ups


def get_app() -> falcon.App:
    """The production app: configuration from the environment, a database pool, and a
    dramatiq-pg broker for the dag-advancer wake-ups."""
    cfg = Config.from_env()
    configure_logging("api", cfg.log_level)
    broker = build_broker(cfg.database_url, max_connections=WAKE_SESSIONS)
    # A wake-up waits for one of the broker's sessions: a burst of triggers on the worker's
    # threads would otherwise find its pool exhausted and leave runs to the sweep.
    sessions = threading.BoundedSemaphore(WAKE_SESSIONS)

    def wake_run(run_id: str, trace_id: str) -> None:
        with sessions:
            send_advance_run(broker, run_id, trace_id)

    deps = Deps(
        db=Database(cfg.database_url),
        wake_run=wake_run,
        config=cfg,
        request_totals=RequestTotals(
            Database(cfg.database_url, max_connections=1, application_name="etl-api-metrics")
        ),
    )
    return create_app(deps, ConsoleSettings.from_config(cfg))
