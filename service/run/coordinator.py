"""`etl coordinator`: the API (gunicorn), the dag-advancer worker, the scheduler, the webhook
notifier, the backfiller, the file watcher and the sweep in one process. It only loads its
configuration, wires the parts together and manages start and stop; if a part dies the
command exits non-zero, so a supervisor restarts it."""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Callable
from contextlib import ExitStack

from dramatiq import Broker

from actors import (
    COORDINATOR_QUEUE,
    SweepSettings,
    build_broker,
    register_advancer,
    run_sweep,
    start_worker,
)
from actors.lineage import start_lineage, stop_lineage
from ddl import connector
from service.backfiller import start_backfiller
from service.config import Config
from service.logs import configure_logging
from service.run.lineage import lineage_places
from service.run.process_samples import ProcessSampler
from service.run.purge import purge_sandbox
from service.run.signals import die_with_parent, listen_heard, stop_on_signals
from service.tracing import setup_tracing, shutdown_tracing
from service.watcher import start_watcher

log = logging.getLogger("etl.process")


def run_coordinator(cfg: Config, api_argv: list[str]) -> int:
    """The API (gunicorn), the dag-advancer worker, the scheduler, the webhook notifier and
    the sweep. If a part dies the command exits non-zero, so a supervisor restarts it.
    Parts stop in the reverse order of their start (an `ExitStack`)."""
    # The coordinator's alone: an executor importing this module loads neither (apscheduler).
    from service.notifier import build_notifier
    from service.scheduler import build_scheduler

    configure_logging("coordinator", cfg.log_level)
    stop = stop_on_signals()
    if not listen_heard(cfg.listen_url, "coordinator", app="etl-coordinator-listen-check"):
        return 2
    with ExitStack() as stack:
        tracing = setup_tracing(
            "coordinator", enabled=cfg.tracing, service_name=cfg.otel_service_name
        )
        stack.callback(shutdown_tracing, tracing)
        sampler = ProcessSampler(
            connector(cfg.database_url, "etl-coordinator-metrics"), "coordinator",
            "coordinator", cfg.heartbeat_s,
        )  # fmt: skip
        stack.enter_context(sampler)
        api = subprocess.Popen(api_argv, preexec_fn=die_with_parent)
        broker = build_broker(
            cfg.database_url,
            listen_url=cfg.listen_url,
            max_connections=12,
            app="etl-coordinator-broker",
        )
        stack.callback(broker.close)
        start_lineage(connector(cfg.database_url, "etl-lineage"), **lineage_places(cfg))
        stack.callback(stop_lineage)
        register_advancer(broker, connector(cfg.database_url, "etl-advancer"))
        worker = start_worker(broker, [COORDINATOR_QUEUE], threads=2)
        stack.callback(worker.stop, timeout=5000)
        sweep_ok = _start_sweep(cfg, broker, stop, stack)
        stack.callback(_stop_api, api)
        for part in (build_notifier(cfg), build_scheduler(cfg, broker)):
            part.start()
            stack.callback(part.shutdown)
        stack.callback(start_backfiller(cfg, broker).shutdown)
        stack.callback(start_watcher(cfg, broker).shutdown)
        stack.callback(stop.set)
        log.info("coordinator started (pid %s), API on %s", os.getpid(), cfg.api_bind)
        code = _watch_api(api, stop)
        code = code if sweep_ok() else 1
    log.info("coordinator stopped")
    return code


def _start_sweep(
    cfg: Config, broker: Broker, stop: threading.Event, stack: ExitStack
) -> Callable[[], bool]:
    """The sweep on a thread of its own, joined when `stack` closes; returns whether it
    ended well."""
    sweep = SweepSettings(
        every_s=cfg.sweep_s,
        retention_s=cfg.retention_days * 86400,
        export_dir=cfg.export_dir,
        reject_dir=cfg.reject_dir,
        stalled_after_s=cfg.lease_ttl_s,
    )
    ok = [True]

    def sweep_loop() -> None:
        ok[0] = run_sweep(
            connector(cfg.database_url, "etl-sweep"), purge_sandbox(cfg), broker, sweep, stop
        )

    sweeper = threading.Thread(target=sweep_loop, name="sweep", daemon=True)
    sweeper.start()
    stack.callback(sweeper.join, timeout=cfg.sweep_s + 5)
    return lambda: ok[0]


def _watch_api(api: subprocess.Popen, stop: threading.Event) -> int:
    """Wait for a stop signal (0) or the API server's death (1)."""
    while not stop.wait(0.5):
        if api.poll() is not None:
            log.error("API server exited with %s", api.returncode)
            return 1
    return 0


def _stop_api(api: subprocess.Popen) -> None:
    if api.poll() is None:
        api.terminate()
        try:
            api.wait(15)
        except subprocess.TimeoutExpired:
            api.kill()
