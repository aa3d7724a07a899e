"""gunicorn settings for the API (`--config python:service.run.gunicorn_conf`): its error and
access logs become JSON lines like every other process's, and each worker sets up tracing
after the fork (the span exporter's thread lives in the worker) and flushes it on exit.
Each worker also pins its allocator's mmap threshold (`service.domain.memory`), so that
the memory of a large request goes back to the system when it ends."""

from service.config import Config
from service.domain.memory import bound_allocator
from service.tracing import setup_tracing, shutdown_tracing

_tracing = []  # this worker's tracer provider, once set up


def post_fork(server, worker) -> None:
    bound_allocator()
    cfg = Config.from_env()
    _tracing.append(setup_tracing("api", enabled=cfg.tracing, service_name=cfg.otel_service_name))


def worker_exit(server, worker) -> None:
    for provider in _tracing:
        shutdown_tracing(provider)


logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "service.logs.JsonFormatter", "process_name": "api"}},
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "formatter": "json",
            "stream": "ext://sys.stderr",
        }
    },
    "root": {"handlers": ["stderr"], "level": "INFO"},
    "loggers": {
        "gunicorn.error": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
        "gunicorn.access": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
    },
}
