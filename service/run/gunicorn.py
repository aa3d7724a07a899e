"""The gunicorn command serving the API: threaded workers and bounded request lines and
headers (`etl api`, the coordinator's API child, the tests' and the drills' servers)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from service.config import Config

# Slow clients: gunicorn's sync workers give a whole process to one connection until its
# headers are in, so two clients trickling headers took the API down. gthread workers park an
# idle connection in the poller, and a client that trickles bytes holds one thread, not the
# process: API_THREADS per worker is the number of such clients a worker absorbs while it
# still answers at once (docs/decisions.md, "Slow clients").
API_THREADS = 64
API_KEEPALIVE_S = 5  # an idle kept-alive connection is closed after this
API_LIMIT_REQUEST_LINE = 4094  # bytes of method + path + query
API_LIMIT_REQUEST_FIELDS = 50  # header lines
API_LIMIT_REQUEST_FIELD_SIZE = 8190  # bytes per header line


def gunicorn_argv(cfg: Config) -> list[str]:
    """The gunicorn command serving the API on `cfg.api_bind` with `cfg.api_workers`
    threaded workers and bounded request lines and headers."""
    local = Path(sys.executable).with_name("gunicorn")
    exe = [str(local)] if local.exists() else [shutil.which("gunicorn") or "gunicorn"]
    return [
        *exe,
        "--workers",
        str(cfg.api_workers),
        "--worker-class",
        "gthread",
        "--threads",
        str(API_THREADS),
        "--keep-alive",
        str(API_KEEPALIVE_S),
        "--timeout",
        "30",
        "--limit-request-line",
        str(API_LIMIT_REQUEST_LINE),
        "--limit-request-fields",
        str(API_LIMIT_REQUEST_FIELDS),
        "--limit-request-field_size",
        str(API_LIMIT_REQUEST_FIELD_SIZE),
        "--bind",
        cfg.api_bind,
        "--no-control-socket",  # gunicorn 27 would share ~/.gunicorn/gunicorn.ctl otherwise
        "--config",
        "python:service.run.gunicorn_conf",  # JSON logs
        "--graceful-timeout",
        "10",
        "--log-level",
        cfg.log_level.lower(),
        "service.app:get_app()",
    ]
