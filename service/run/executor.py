"""`etl executor`: one executor process, a dramatiq worker for the `steps` queue running one
step attempt at a time. It only loads its configuration, wires the parts together and
manages start and stop (a SIGTERM hands the running step over at its next batch)."""

from __future__ import annotations

import logging
import os
import re
import threading
import uuid
from contextlib import ExitStack

from dramatiq import Broker

from actors import (
    STEPS_QUEUE,
    DirectoryMismatch,
    ExecutorSettings,
    Faults,
    Presence,
    StepRunner,
    build_broker,
    register_step_runner,
    release_own_leases,
    send_advance_run,
    send_run_step,
    start_worker,
)
from actors.lineage import start_lineage, stop_lineage
from dag import fusion_budget
from ddl import connect, connector
from service.config import Config
from service.logs import configure_logging
from service.run.lineage import lineage_places
from service.run.process_samples import ProcessSampler
from service.run.signals import listen_heard, stop_on_signals
from service.tracing import setup_tracing, shutdown_tracing

log = logging.getLogger("etl.process")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def executor_name(template: str, hostname: str, pid: int) -> str:
    """`template` with `{hostname}` and `{pid}` replaced: one replica of a scaled service
    (`executor-{hostname}`, the container's id) gets a name no other live replica has, and
    keeps it across restarts of its container. `ValueError` for any other placeholder or a
    name that is not 1-63 letters, digits, `.`, `_` or `-` (`:` separates the boot id)."""
    try:
        name = template.format(hostname=hostname.split(".")[0], pid=pid)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"{template!r}: only {{hostname}} and {{pid}} may be replaced") from exc
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name!r} (from {template!r}) is not 1-63 letters, digits, . _ -")
    return name


def run_executor(cfg: Config, name: str) -> int:
    """One executor: a dramatiq worker for the `steps` queue running one step at a time.
    Exit code 2 when it does not see the live executors' export and reject directories.
    Its parts stop in the reverse order of their start (an `ExitStack`)."""
    configure_logging(name, cfg.log_level)
    owner = f"{name}:{uuid.uuid4().hex[:8]}"
    stop = stop_on_signals()
    if not listen_heard(cfg.listen_url, f"executor {owner}", app=f"etl-{name}-listen-check"):
        return 2
    with ExitStack() as stack:
        tracing = setup_tracing("executor", enabled=cfg.tracing, service_name=cfg.otel_service_name)
        stack.callback(shutdown_tracing, tracing)
        sampler = ProcessSampler(
            connector(cfg.database_url, f"etl-{name}-metrics"), name, "executor", cfg.heartbeat_s
        )
        stack.enter_context(sampler)
        stack.callback(stop_lineage)  # what the last attempt told goes out
        broker = build_broker(
            cfg.database_url, listen_url=cfg.listen_url, max_connections=8, app=f"etl-{name}-broker"
        )
        stack.callback(broker.close)
        runner = _step_runner(cfg, name, owner, broker, stop)
        register_step_runner(broker, runner, time_limit_ms=int(cfg.step_timeout_s * 1000) + 60_000)
        start_lineage(connector(cfg.database_url, f"etl-{name}-lineage"), **lineage_places(cfg))
        presence = Presence(
            connector(cfg.database_url, f"etl-{name}-presence"),
            name=name,
            owner=owner,
            interval_s=cfg.heartbeat_s,
            stale_after_s=cfg.lease_ttl_s,
            export_dir=cfg.export_dir,
            reject_dir=cfg.reject_dir,
        )
        try:
            stack.enter_context(presence)  # announced only if it sees the live ones' directories
        except DirectoryMismatch as exc:
            log.error("executor %s refuses to start: %s", owner, exc)
            return 2
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
    log.info("executor %s stopped", owner)
    return 0


def _step_runner(
    cfg: Config, name: str, owner: str, broker: Broker, stop: threading.Event
) -> StepRunner:
    """The step runner of executor `name`, with its database sessions and wake-ups."""
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
        fusion_budget=fusion_budget(cfg.executor_memory_mib * 2**20),
        overlap=cfg.overlap,
        sandbox_in_state=cfg.sandbox_url == cfg.database_url,
    )
    return StepRunner(
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
        # The same for its sandbox session: frozen between a staging COPY and its COMMIT,
        # it would hold the staged keys, and the attempt that took over would wait on them.
        connect_sandbox=connector(
            cfg.sandbox_url,
            f"etl-{name}-sandbox",
            statement_timeout_s=cfg.step_timeout_s,
            idle_in_transaction_timeout_s=2 * cfg.lease_ttl_s,
        ),
        # The batches' commits, sent while the next batch is computed: the state session's
        # statement limit (each query is a transaction of its own: never idle in one), and
        # no wait for each commit's WAL flush (the step's fenced commit before it publishes
        # waits for all of them: docs/decisions.md, "Batches committed ahead").
        connect_commits=connector(
            cfg.database_url,
            f"etl-{name}-commits",
            asynchronous=True,
            statement_timeout_s=60,
            synchronous_commit=False,
        ),
        wake_run=lambda run_id, trace_id, delay_ms: send_advance_run(
            broker, run_id, trace_id, delay_ms=delay_ms
        ),
        wake_attempt=lambda attempt_id, trace_id: send_run_step(broker, attempt_id, trace_id),
        stopping=stop,
    )
