"""Readiness: which steps of a run start next, which are settled without running, and
whether the run is over. Pure: the caller reads the step states, calls `decide`, and writes
the transitions it returns.

Policies (`on_failure` in docs/plan-format.md): the dependents of a failed step never run, they
end `upstream_failed`. Under `stop_dependents` nothing new starts once a step has failed (the
other pending steps end `not_run`; running and retry_wait steps finish and commit). Under
`continue_independent` the branches that do not depend on the failure run to the end.

A step waiting for a retry normally has every dependency succeeded; a fused follower that
failed inside its head's attempt does not (docs/decisions.md, "Stage fusion"): its retry
waits for its upstream, and ends with it when that upstream can no longer succeed. So no
combination of states leaves a run with nothing running, nothing to start and not finished.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from dag.plan import STOP_DEPENDENTS, Plan
from dag.states import STEP_TERMINAL, RunStatus, StepStatus

PENDING, RUNNING, RETRY_WAIT = StepStatus.PENDING, StepStatus.RUNNING, StepStatus.RETRY_WAIT
SUCCEEDED, FAILED, CANCELED = StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.CANCELED
UPSTREAM_FAILED, NOT_RUN = StepStatus.UPSTREAM_FAILED, StepStatus.NOT_RUN

STEP_STATUSES = tuple(StepStatus)
TERMINAL_STATUSES = STEP_TERMINAL
# A dependency in one of these will never produce output, so its dependents cannot run.
_BLOCKING = frozenset({FAILED, UPSTREAM_FAILED, NOT_RUN, CANCELED})
# What a resume resets to pending: everything that ended without committed output.
RERUN_STATUSES = frozenset({FAILED, UPSTREAM_FAILED, NOT_RUN, CANCELED})


@dataclass(frozen=True)
class Readiness:
    """The decision for a run: steps to start and steps newly settled, each in plan order.

    `ready` are pending steps to start; `retries` are due retries to start (retry_wait).

    `upstream_failed`, `not_run` and `canceled` list only steps that change in this call.
    `finished` and `run_status` describe the run once those changes are applied.
    """

    ready: tuple[str, ...] = ()
    retries: tuple[str, ...] = ()
    upstream_failed: tuple[str, ...] = ()
    not_run: tuple[str, ...] = ()
    canceled: tuple[str, ...] = ()
    finished: bool = False
    run_status: str | None = None

    def transitions(self) -> dict[str, str]:
        """Step name -> new status for every step this decision settles (not the ready ones)."""
        changes = dict.fromkeys(self.upstream_failed, UPSTREAM_FAILED)
        changes.update(dict.fromkeys(self.not_run, NOT_RUN))
        changes.update(dict.fromkeys(self.canceled, CANCELED))
        return changes


def decide(
    plan: Plan,
    states: Mapping[str, str],
    *,
    cancel_requested: bool = False,
    due_retries: Collection[str] = (),
) -> Readiness:
    """Decide the next moves of a run from the status of each of its steps.

    `states` maps every step name of `plan` to one of `STEP_STATUSES` (ValueError otherwise;
    names not in the plan are ignored); `due_retries` names the retry_wait steps whose delay
    is over. One call settles the whole graph: applying its transitions and calling again
    yields no new transitions. Never mutates its inputs.

    - cancel: nothing starts; pending and retry_wait steps become `canceled`.
    - a pending or retry_wait step with a dependency that failed or will never run becomes
      `upstream_failed` (transitively).
    - a due retry starts once every dependency of its step succeeded (under either policy:
      a started step finishes).
    - stop_dependents after a failure: nothing new is ready; the other pending steps become
      `not_run`, except those downstream of a running/retry_wait step, which wait for it so
      that they end `upstream_failed` if it fails too (the run cannot finish before it
      anyway); a retry_wait step whose dependency ends `not_run` can never run: `not_run`.
    """
    status = _statuses(plan, states)
    changed: dict[str, str] = {}
    if cancel_requested:
        _cancel_unstarted(plan, status, changed)
        return _readiness(plan, status, changed, ready=())

    frozen = plan.on_failure == STOP_DEPENDENTS and FAILED in status.values()
    # Under a frozen run a not_run dependency means "stopped by the policy", not a failure.
    blocking = _BLOCKING - {NOT_RUN} if frozen else _BLOCKING
    _settle_upstream_failed(plan, status, changed, blocking)
    if frozen:
        _settle_not_run(plan, status, changed)
    # Once frozen nothing new starts; due retries still do (a started step finishes).
    ready = () if frozen else _ready(plan, status)
    retries = _retries(plan, status, due_retries)
    return _readiness(plan, status, changed, ready=ready, retries=retries)


def _settle(status: dict[str, str], changed: dict[str, str], name: str, new_status: str) -> None:
    """Record a transition in the working statuses and among this decision's changes."""
    status[name] = new_status
    changed[name] = new_status


def _cancel_unstarted(plan: Plan, status: dict[str, str], changed: dict[str, str]) -> None:
    """A cancel: every step that has not started (or waits for a retry) ends `canceled`."""
    # Running steps stop cooperatively at their next batch boundary; the runner records that.
    for step in plan.steps:
        if status[step.name] in (PENDING, RETRY_WAIT):
            _settle(status, changed, step.name, CANCELED)


def _settle_upstream_failed(
    plan: Plan, status: dict[str, str], changed: dict[str, str], blocking: Collection[str]
) -> None:
    """Pending and retry_wait steps with a `blocking` dependency end `upstream_failed`,
    transitively."""
    # Plan order need not be topological, so repeat until nothing changes.
    progress = True
    while progress:
        progress = False
        for step in plan.steps:
            if status[step.name] in (PENDING, RETRY_WAIT) and any(
                status[dep] in blocking for dep in step.depends_on
            ):
                _settle(status, changed, step.name, UPSTREAM_FAILED)
                progress = True


def _settle_not_run(plan: Plan, status: dict[str, str], changed: dict[str, str]) -> None:
    """stop_dependents after a failure: pending steps not downstream of a running or
    retry_wait step, and retry_wait steps with a `not_run` dependency, end `not_run`."""
    progress = True
    while progress:
        progress = False
        undecided: set[str] = set()
        for step in plan.steps:
            if status[step.name] in (RUNNING, RETRY_WAIT):
                undecided.update(plan.descendants(step.name))
        for step in plan.steps:
            name = status[step.name]
            if (name == PENDING and step.name not in undecided) or (
                name == RETRY_WAIT and any(status[d] == NOT_RUN for d in step.depends_on)
            ):
                _settle(status, changed, step.name, NOT_RUN)
                progress = True


def _ready(plan: Plan, status: Mapping[str, str]) -> tuple[str, ...]:
    """The pending steps whose dependencies all succeeded."""
    return tuple(
        step.name
        for step in plan.steps
        if status[step.name] == PENDING and all(status[dep] == SUCCEEDED for dep in step.depends_on)
    )


def _retries(plan: Plan, status: Mapping[str, str], due: Collection[str]) -> tuple[str, ...]:
    """The due retries that may start: their step still waits and its inputs are there."""
    return tuple(
        step.name
        for step in plan.steps
        if step.name in due
        and status[step.name] == RETRY_WAIT
        and all(status[dep] == SUCCEEDED for dep in step.depends_on)
    )


def steps_to_rerun(plan: Plan, states: Mapping[str, str]) -> tuple[str, ...]:
    """The steps a resume resets to `pending`, in plan order.

    Failed steps and every step that ended without running (`upstream_failed`, `not_run`,
    `canceled`); succeeded steps keep their committed output. Steps still pending, running
    or waiting for a retry are left out (a resume is for a finished run).
    """
    status = _statuses(plan, states)
    return tuple(step.name for step in plan.steps if status[step.name] in RERUN_STATUSES)


def _statuses(plan: Plan, states: Mapping[str, str]) -> dict[str, str]:
    """A private copy of the plan's step statuses, checked to be complete and known."""
    status: dict[str, str] = {}
    for step in plan.steps:
        if step.name not in states:
            raise ValueError(f"no state for step {step.name!r}")
        value = states[step.name]
        if value not in STEP_STATUSES:
            raise ValueError(f"unknown status {value!r} for step {step.name!r}")
        status[step.name] = value
    return status


def _readiness(
    plan: Plan,
    status: Mapping[str, str],
    changed: Mapping[str, str],
    ready: tuple[str, ...],
    retries: tuple[str, ...] = (),
) -> Readiness:
    finished = all(s in TERMINAL_STATUSES for s in status.values())
    return Readiness(
        ready=ready,
        retries=retries,
        upstream_failed=_named(plan, changed, UPSTREAM_FAILED),
        not_run=_named(plan, changed, NOT_RUN),
        canceled=_named(plan, changed, CANCELED),
        finished=finished,
        run_status=_run_status(status.values()) if finished else None,
    )


def _named(plan: Plan, changed: Mapping[str, str], new_status: str) -> tuple[str, ...]:
    return tuple(s.name for s in plan.steps if changed.get(s.name) == new_status)


def _run_status(statuses: Iterable[str]) -> RunStatus:
    values = set(statuses)
    if CANCELED in values:
        return RunStatus.CANCELED
    if values & {FAILED, UPSTREAM_FAILED, NOT_RUN}:
        return RunStatus.FAILED
    return RunStatus.SUCCEEDED
