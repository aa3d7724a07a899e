"""The execution engine: broker and wake-ups, the dag-advancer, executors with fenced leases
and per-batch checkpoints, and the coordinator's sweep."""

from actors.advancer import Advance, advance_pipeline, advance_run, send_wakeups
from actors.broker import (
    COORDINATOR_QUEUE,
    STEPS_QUEUE,
    build_broker,
    check_listen,
    send_advance_run,
    send_run_step,
)
from actors.errors import ActorError, DirectoryMismatch, LeaseLost, ListenSilent
from actors.faults import Faults
from actors.metric_fold import fold_metric_deltas
from actors.presence import Presence
from actors.purge import PurgeReport, purge_finished_runs
from actors.runner import ExecutorSettings, StepRunner
from actors.sweep import (
    SweepSettings,
    purge_broker,
    release_own_leases,
    run_sweep,
    sweep_once,
)
from actors.tracing import param_attributes
from actors.workers import register_advancer, register_step_runner, start_worker

__all__ = [
    "COORDINATOR_QUEUE",
    "STEPS_QUEUE",
    "ActorError",
    "Advance",
    "DirectoryMismatch",
    "ExecutorSettings",
    "Faults",
    "LeaseLost",
    "ListenSilent",
    "Presence",
    "PurgeReport",
    "StepRunner",
    "SweepSettings",
    "advance_pipeline",
    "advance_run",
    "build_broker",
    "check_listen",
    "fold_metric_deltas",
    "param_attributes",
    "purge_broker",
    "purge_finished_runs",
    "register_advancer",
    "register_step_runner",
    "release_own_leases",
    "run_sweep",
    "send_advance_run",
    "send_run_step",
    "send_wakeups",
    "start_worker",
    "sweep_once",
]
