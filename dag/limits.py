"""The product's fixed limits, in one place: every layer (validation, readers, engine,
admission, API messages, drills and bench) imports them from here instead of retyping them."""

from __future__ import annotations

from dataclasses import dataclass, field

# Numbers are int64 everywhere: values, sums, literals in plans, sandbox columns.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# A plan holds 1..30 steps.
MIN_STEPS = 1
MAX_STEPS = 30

# Records per batch: the unit of reading, checkpointing, committing and cancel checks.
BATCH_SIZE = 500

# The largest file an ingest may read.
MAX_SOURCE_BYTES = 50 * 1024 * 1024

# Delay before attempt n + 1 after attempt n failed is RETRY_DELAYS_S[n - 1]; the delays
# define the ceiling of attempts per step.
RETRY_DELAYS_S: tuple[float, ...] = (1.0, 2.0)
MAX_ATTEMPTS = len(RETRY_DELAYS_S) + 1
DEFAULT_MAX_ATTEMPTS = MAX_ATTEMPTS

# Admission: per pipeline one running run and three queued; at most 20 queued or running
# runs in all. A trigger past either limit is skipped (`queue_full` / `busy`).
PIPELINE_RUNNING_LIMIT = 1
PIPELINE_QUEUE_LIMIT = 3
PIPELINE_ACTIVE_LIMIT = PIPELINE_RUNNING_LIMIT + PIPELINE_QUEUE_LIMIT
GLOBAL_ACTIVE_LIMIT = 20
# Of a pipeline's active slots, runs of backfills and watched files together hold at most two,
# so clock fires and manual triggers keep the others.
BACKFILL_ACTIVE_LIMIT = 2


@dataclass
class PassRoom:
    """The room an admission pass of backfill values or watched files has: `total` slots
    left on the platform, `left` admissions the pass may still make, and what it `taken`
    per pipeline so far (the counts it read predate the pass)."""

    total: int
    left: int
    taken: dict[str, int] = field(default_factory=dict)

    def of(self, pipeline: str, background: int, active: int) -> int:
        """Admissions `pipeline` has room for, with `background` of its `active` runs
        admitted by backfills or watched files (their `BACKFILL_ACTIVE_LIMIT` share)."""
        taken = self.taken.get(pipeline, 0)
        return min(
            BACKFILL_ACTIVE_LIMIT - background - taken,
            PIPELINE_ACTIVE_LIMIT - active - taken,
            self.total,
            self.left,
        )

    def take(self, pipeline: str, admitted: int) -> None:
        """Count `admitted` runs of `pipeline` against the room."""
        self.taken[pipeline] = self.taken.get(pipeline, 0) + admitted
        self.total -= admitted
        self.left -= admitted
