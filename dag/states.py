"""The states of runs, steps and step attempts, and the outcomes of admission: one `StrEnum`
each, for Python code to name a state by (SQL files spell them as literals, checked by the
CHECK constraints in `ddl/migrations`). The values are the database's and the API's.

The sets, one meaning per name: `RUN_ACTIVE` (queued or running: holds a slot),
`RUN_TERMINAL` (admitted and ended: succeeded, failed, canceled), `RUN_FINAL` (will never
change again: terminal or skipped), `STEP_TERMINAL` (a step that has ended, run or not)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any


class RunStatus(StrEnum):
    """A run's status."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"
    SKIPPED = "skipped"


class StepStatus(StrEnum):
    """A step's status within a run."""

    PENDING = "pending"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UPSTREAM_FAILED = "upstream_failed"
    NOT_RUN = "not_run"
    CANCELED = "canceled"


class AttemptOutcome(StrEnum):
    """How a step attempt ended (null while it runs)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INPUT_ERROR = "input_error"
    TIMEOUT = "timeout"
    LEASE_EXPIRED = "lease_expired"
    CANCELED = "canceled"
    SUPERSEDED = "superseded"
    RELEASED = "released"


class SkipReason(StrEnum):
    """Why a trigger was skipped instead of queued."""

    QUEUE_FULL = "queue_full"
    BUSY = "busy"


RUN_ACTIVE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})
RUN_TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELED})
RUN_FINAL = RUN_TERMINAL | {RunStatus.SKIPPED}
STEP_TERMINAL = frozenset(
    {
        StepStatus.SUCCEEDED,
        StepStatus.FAILED,
        StepStatus.UPSTREAM_FAILED,
        StepStatus.NOT_RUN,
        StepStatus.CANCELED,
    }
)


def attempts_that_ran(status: str, attempts: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The attempts to show as a step's own: all, except for a step that never ran
    (`upstream_failed`, `not_run`) the attempt it was fused into another step's (`fused_into`
    set) and `released` from when that step failed: the work was the other step's, and the
    step did not run."""
    if status not in (StepStatus.UPSTREAM_FAILED, StepStatus.NOT_RUN):
        return list(attempts)
    return [
        a
        for a in attempts
        if not (a.get("fused_into") and a.get("outcome") == AttemptOutcome.RELEASED)
    ]
