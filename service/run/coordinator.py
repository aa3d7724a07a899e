"""`etl coordinator`: the API (gunicorn), the dag-advancer worker, the scheduler, the webhook
notifier and the sweep in one process. It only loads its configuration, wires the parts
together and manages start and stop; if a part dies the command exits non-zero, so a
supervisor restarts it."""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Callable

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
from service.config import Config
from service.logs import configure_logging
from service.run.lifecycle import die_with_parent, listen_heard, stop_on_signals
from service.run.lineage import lineage_places
from service.run.purge import purge_sandbox
from service.tracing import setup_tracing, shutdown_tracing

log = logging.getLogger("etl.process")


def run_coordinator(
    cfg: Config,
    api_argv: list[str],
    *,
    scheduler_factory: Callable | None = None,
    notifier_factory: Callable | None = None,
) -> int:
    """The API (gunicorn), the dag-advancer worker, the scheduler, the webhook notifier and
    the sweep. If a part dies the command exits non-zero, so a supervisor restarts it."""
    configure_logging("coordinator", cfg.log_level)
    tracing = setup_tracing("coordinator", enabled=cfg.tracing, service_name=cfg.otel_service_name)
    stop = stop_on_signals()
    if not listen_heard(cfg.listen_url, "coordinator", app="etl-coordinator-listen-check"):
        return 2
    api = subprocess.Popen(api_argv, preexec_fn=die_with_parent)
    broker = build_broker(
        cfg.database_url,
        listen_url=cfg.listen_url,
        max_connections=12,
        app="etl-coordinator-broker",
    )
    start_lineage(connector(cfg.database_url, "etl-lineage"), **lineage_places(cfg))
    register_advancer(broker, connector(cfg.database_url, "etl-advancer"))
    worker = start_worker(broker, [COORDINATOR_QUEUE], threads=2)
    scheduler = scheduler_factory(cfg, broker) if scheduler_factory else None
    if scheduler is not None:
        scheduler.start()
    notifier = notifier_factory(cfg) if notifier_factory else None
    if notifier is not None:
        notifier.start()
    sweeper, sweep_ok = _start_sweep(cfg, broker, stop)
    log.info("coordinator started (pid %s), API on %s", os.getpid(), cfg.api_bind)
    code = 0
    while not stop.wait(0.5):
        if api.poll() is not None:
            log.error("API server exited with %s", api.returncode)
            code = 1
            break
    if not sweep_ok[0]:
        code = 1
    stop.set()
    if scheduler is not None:
        scheduler.shutdown()
    if notifier is not None:
        notifier.shutdown()
    if api.poll() is None:
        api.terminate()
        try:
            api.wait(15)
        except subprocess.TimeoutExpired:
            api.kill()
    worker.stop(timeout=5000)
    sweeper.join(timeout=cfg.sweep_s + 5)
    stop_lineage()
    broker.close()
    shutdown_tracing(tracing)
    log.info("coordinator stopped")
    return code


def _start_sweep(cfg: Config, broker, stop: threading.Event) -> tuple[threading.Thread, list[bool]]:
    """The sweep's thread, started; `ok[0]` turns False if the sweep gave up."""
    settings = SweepSettings(
        every_s=cfg.sweep_s,
        retention_s=cfg.retention_days * 86400,
        export_dir=cfg.export_dir,
        reject_dir=cfg.reject_dir,
        stalled_after_s=cfg.lease_ttl_s,
    )
    ok = [True]

    def sweep_loop() -> None:
        ok[0] = run_sweep(
            connector(cfg.database_url, "etl-sweep"), purge_sandbox(cfg), broker, settings, stop
        )

    sweeper = threading.Thread(target=sweep_loop, name="sweep", daemon=True)
    sweeper.start()
    return sweeper, ok
