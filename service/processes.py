"""The long-running processes: `etl coordinator` and `etl executor`. Each only loads its
configuration, wires the parts together and manages start and stop."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import threading
import uuid
from collections.abc import Callable

from actors import (
    COORDINATOR_QUEUE,
    STEPS_QUEUE,
    ExecutorSettings,
    Faults,
    PurgeReport,
    StepRunner,
    SweepSettings,
    build_broker,
    purge_finished_runs,
    register_advancer,
    register_step_runner,
    release_own_leases,
    run_sweep,
    send_advance_run,
    send_run_step,
    start_worker,
)
from ddl import connect, connector
from service.config import Config
from service.logs import configure_logging

log = logging.getLogger("etl.process")


def _die_with_parent() -> None:
    """In the API child, before exec: ask the kernel to SIGTERM it when the coordinator dies
    (even by SIGKILL), so a restarted coordinator never finds an orphan on its port."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def handler(signum, _frame) -> None:
        log.info("signal %s received, stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def run_executor(cfg: Config, name: str) -> int:
    """One executor: a dramatiq worker for the `steps` queue running one step at a time."""
    configure_logging(name, cfg.log_level)
    owner = f"{name}:{uuid.uuid4().hex[:8]}"
    stop = _stop_on_signals()
    broker = build_broker(cfg.database_url, max_connections=8, app=f"etl-{name}-broker")
    settings = ExecutorSettings(
        name=name,
        owner=owner,
        lease_ttl_s=cfg.lease_ttl_s,
        heartbeat_s=cfg.heartbeat_s,
        step_timeout_s=cfg.step_timeout_s,
        data_dir=cfg.data_dir,
        export_dir=cfg.export_dir,
        reject_dir=cfg.reject_dir,
        faults=Faults.parse(cfg.fault),
        fusion=cfg.fusion,
    )
    runner = StepRunner(
        settings,
        # No statement may outlive the step timeout: a lock held by some reader of the
        # sandbox must fail the attempt (retryable), not hang the run. An executor frozen
        # inside a fenced commit (SIGSTOP) holds its attempt row, which the reaper skips:
        # its session ends after two leases, so the step is handed over all the same.
        connect_state=connector(
            cfg.database_url,
            f"etl-{name}",
            statement_timeout_s=60,
            idle_in_transaction_timeout_s=2 * cfg.lease_ttl_s,
        ),
        connect_sandbox=connector(
            cfg.sandbox_url, f"etl-{name}-sandbox", statement_timeout_s=cfg.step_timeout_s
        ),
        wake_run=lambda run_id, trace_id, delay_ms: send_advance_run(
            broker, run_id, trace_id, delay_ms=delay_ms
        ),
        wake_attempt=lambda attempt_id, trace_id: send_run_step(broker, attempt_id, trace_id),
        stopping=stop,
    )
    register_step_runner(broker, runner, time_limit_ms=int(cfg.step_timeout_s * 1000) + 60_000)
    conn = connect(cfg.database_url, f"etl-{name}-boot")
    try:
        taken = release_own_leases(conn, broker, name=name, owner=owner)
    finally:
        conn.close()
    log.info("executor %s started (pid %s), took over %d leases", owner, os.getpid(), taken)
    worker = start_worker(broker, [STEPS_QUEUE], threads=1)
    stop.wait()
    # A running step sees `stop` at its next batch boundary and hands the step over.
    worker.stop(timeout=int(cfg.lease_ttl_s * 1000))
    broker.close()
    log.info("executor %s stopped", owner)
    return 0


def _purge_sandbox(cfg: Config):
    return connector(cfg.sandbox_url, "etl-purge", statement_timeout_s=10)


def purge_runs(cfg: Config, conn, *, older_than_days: float, limit: int | None) -> PurgeReport:
    """Purge the intermediate outputs of runs that finished at least `older_than_days` ago
    (at most `limit` runs; all of them when None)."""
    return purge_finished_runs(
        conn,
        older_than_s=older_than_days * 86400,
        export_dir=cfg.export_dir,
        reject_dir=cfg.reject_dir,
        connect_sandbox=_purge_sandbox(cfg),
        limit=limit,
    )


def run_coordinator(
    cfg: Config, api_argv: list[str], *, scheduler_factory: Callable | None = None
) -> int:
    """The API (gunicorn), the dag-advancer worker, the scheduler and the sweep. If a part
    dies the command exits non-zero, so a supervisor restarts it."""
    configure_logging("coordinator", cfg.log_level)
    stop = _stop_on_signals()
    api = subprocess.Popen(api_argv, preexec_fn=_die_with_parent)
    broker = build_broker(cfg.database_url, max_connections=12, app="etl-coordinator-broker")
    register_advancer(broker, connector(cfg.database_url, "etl-advancer"))
    worker = start_worker(broker, [COORDINATOR_QUEUE], threads=2)
    scheduler = scheduler_factory(cfg, broker) if scheduler_factory else None
    if scheduler is not None:
        scheduler.start()
    sweep = SweepSettings(
        every_s=cfg.sweep_s,
        retention_s=cfg.retention_days * 86400,
        export_dir=cfg.export_dir,
        reject_dir=cfg.reject_dir,
        stalled_after_s=cfg.lease_ttl_s,
    )
    sweep_ok = [True]

    def sweep_loop() -> None:
        sweep_ok[0] = run_sweep(
            connector(cfg.database_url, "etl-sweep"), _purge_sandbox(cfg), broker, sweep, stop
        )

    sweeper = threading.Thread(target=sweep_loop, name="sweep", daemon=True)
    sweeper.start()
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
    if api.poll() is None:
        api.terminate()
        try:
            api.wait(15)
        except subprocess.TimeoutExpired:
            api.kill()
    worker.stop(timeout=5000)
    sweeper.join(timeout=cfg.sweep_s + 5)
    broker.close()
    log.info("coordinator stopped")
    return code
