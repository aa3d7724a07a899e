"""The dramatiq side: actors bound to their collaborators, and in-process workers.

Actors are registered on a broker built from configuration (no global broker, nothing read
from the environment at import) and stay thin: decode the message, call the engine."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import dramatiq

from actors.advancer import advance_run, send_wakeups
from actors.broker import ADVANCE_RUN, COORDINATOR_QUEUE, RUN_STEP, STEPS_QUEUE
from actors.runner import StepRunner
from ddl import KeptSession, connection_lost

log = logging.getLogger("etl.workers")


def register_advancer(broker: dramatiq.Broker, connect_state: Callable[[], Any]) -> dramatiq.Actor:
    """The dag-advancer actor on the `coordinator` queue (a connection per worker thread)."""
    local = threading.local()

    def advance(run_id: str, trace_id: str = "") -> None:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = KeptSession(connect_state)
        conn = session.connection()
        try:
            result = advance_run(conn, run_id)
        except Exception as exc:
            if not connection_lost(exc):
                raise
            # Expected (a restart, a terminated backend): the next message or the sweep
            # advances the run again, on a new session.
            session.close()
            log.warning(
                "advancer session lost; the run is advanced again later: %s",
                str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                extra={"run_id": run_id},
            )
            return
        send_wakeups(broker, run_id, trace_id, result)

    return dramatiq.actor(
        advance,
        actor_name=ADVANCE_RUN,
        queue_name=COORDINATOR_QUEUE,
        broker=broker,
        max_retries=0,
        time_limit=60_000,
    )


def register_step_runner(
    broker: dramatiq.Broker, runner: StepRunner, *, time_limit_ms: int
) -> dramatiq.Actor:
    """The step actor on the `steps` queue; the lease row, not the message, decides who runs."""

    def run_step(attempt_id: int, trace_id: str = "") -> None:
        runner.run_attempt(int(attempt_id))

    return dramatiq.actor(
        run_step,
        actor_name=RUN_STEP,
        queue_name=STEPS_QUEUE,
        broker=broker,
        max_retries=0,
        time_limit=time_limit_ms,
    )


def start_worker(broker: dramatiq.Broker, queues: list[str], *, threads: int) -> dramatiq.Worker:
    """An in-process dramatiq worker that prefetches one message per thread, so an idle
    executor is never starved by a busy one holding extra messages."""
    worker = dramatiq.Worker(
        broker, queues=set(queues), worker_threads=threads, worker_timeout=1000
    )
    worker.queue_prefetch = threads
    worker.start()
    return worker
