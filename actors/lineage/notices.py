"""What the engine tells lineage: a notice of plain values per state change, and how an
attempt's outcome or a run's final status ends its OpenLineage run. Imports nothing of the
OpenLineage client, so the hooks cost nothing to import where lineage stays off."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from dag import AttemptOutcome, RunStatus

START, COMPLETE, FAIL, ABORT = "START", "COMPLETE", "FAIL", "ABORT"
STEP_EVENT = {
    AttemptOutcome.SUCCEEDED: COMPLETE,
    AttemptOutcome.FAILED: FAIL,
    AttemptOutcome.INPUT_ERROR: FAIL,
    AttemptOutcome.TIMEOUT: FAIL,
    AttemptOutcome.CANCELED: ABORT,
    AttemptOutcome.RELEASED: ABORT,  # the step goes on in a new attempt
    AttemptOutcome.LEASE_EXPIRED: ABORT,  # likewise, after the reaper took it over
}
RUN_EVENT = {
    RunStatus.SUCCEEDED: COMPLETE,
    RunStatus.FAILED: FAIL,
    RunStatus.CANCELED: ABORT,
}


@dataclass(frozen=True)
class Notice:
    """A state change to tell, taken right after the transaction that made it committed:
    a pipeline run's (`step` None) or a step attempt's. `event_type` is an OpenLineage
    event type (START, COMPLETE, FAIL, ABORT)."""

    event_type: str
    run_id: str
    at: datetime
    step: str | None = None
    attempt: int | None = None  # None for a reaped step: its last expired attempt
    error: str | None = None
