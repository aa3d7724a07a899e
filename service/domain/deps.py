"""What the faces (REST API, console) are built on: the database, the advancer's wake-up,
the clock and the id generator, injected so that tests control time and ids without
monkeypatching; and `wake`, the one way a change wakes the dag-advancer after COMMIT."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from opentelemetry import trace
from opentelemetry.trace import Tracer

from service.config import Config
from service.domain.authfailures import Penalties
from service.domain.db import Database
from service.domain.processmetrics import RequestTotals

log = logging.getLogger(__name__)


def now_utc() -> datetime:
    """The production clock: an aware UTC datetime."""
    return datetime.now(UTC)


def faces_tracer() -> Tracer:
    """The tracer of the faces' trigger spans: the process's provider (`service.tracing`)."""
    return trace.get_tracer("etl.api")


@dataclass(frozen=True)
class Deps:
    """What the resources need. `wake_run(run_id, trace_id)` asks the dag-advancer to look
    at a run; `now` and `new_id` are injected so tests control time and ids, `tracer` so
    they read the trigger spans from an SDK of their own, `penalties` (the waits of failed
    authentications, one per process) so they see the delays without waiting them out."""

    db: Database
    wake_run: Callable[[str, str], None]
    now: Callable[[], datetime] = now_utc
    new_id: Callable[[], uuid.UUID] = uuid.uuid4
    config: Config = field(default_factory=Config)  # directories and sandbox of previews
    tracer: Tracer = field(default_factory=faces_tracer)
    penalties: Penalties = field(default_factory=Penalties)
    metrics_max_age_s: float = 1.0  # a `/metrics` body is reused this long (one read a second)
    request_totals: RequestTotals = field(default_factory=RequestTotals)  # this process's


def wake(deps: Deps, run: dict) -> None:
    """Wake the dag-advancer for `run` after COMMIT; the sweep re-sends a lost wake-up, so
    a failure here is only logged."""
    try:
        deps.wake_run(str(run["id"]), run["trace_id"])
    except Exception:
        log.exception("could not wake run %s; the sweep will", run["id"])
