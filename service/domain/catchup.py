"""Catch-up of every missed interval of a schedule (`"catchup": "all"`, docs/schedules.md):
after downtime the scheduler (`service.scheduler`, at load or when a known schedule is
overdue) calls `catch_up_schedule` instead of firing the latest missed time only.

One transaction, the caller's: lock the schedule row (as a fire does), list the fire times
from its `next_fire_at` to the clock, and make them one backfill of the schedule's intervals
(`service.domain.backfills.insert_backfill`: values are the fire times, each run gets the
interval it closes as built-ins, key `backfill:<id>:<fire time>`), admitted in order as the
pipeline has room, never skipped. The fire is recorded on the schedule (`last_fired_at` the
latest missed time, `last_backfill_id`, `next_fire_at` after the clock), so a second
coordinator or a restart finds nothing missed, and a late job fire of a time the backfill
holds makes no run (`service.domain.schedules.fire_schedule`). One missed fire, a paused
pipeline, or a plan needing a value no fire gives is an ordinary fire of the latest time
(`fire_schedule`: a run, or the fire recorded as skipped). Lock order: the schedule row,
then the admission lock."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dag import INTERVAL_FORMAT, MAX_RANGE_VALUES
from service.domain.backfills import INTERVAL_PARAM, admit_waiting, insert_backfill
from service.domain.db import Cursor, execute, fetch_one
from service.domain.runparams import bind_params
from service.domain.runs import Admission
from service.domain.schedules import PRINCIPAL, Fire, ScheduleSpec, fire_schedule
from service.errors import ValidationFailed


@dataclass
class CatchUp:
    """What a catch-up made: a backfill of the missed fire times (`backfill_id`, `total`)
    and the runs admitted with it, or an ordinary fire (`fire`); nothing when no fire was
    missed after all (another coordinator caught up first) or the schedule is gone."""

    backfill_id: str | None = None
    total: int = 0
    admitted: list[Admission] = field(default_factory=list)
    fire: Fire | None = None


def _fits(pipeline: dict, spec: ScheduleSpec) -> bool:
    """Whether a fire's run of the pipeline's current plan gets every value it needs from
    the interval built-ins and the defaults (else the fire records `plan_invalid`)."""
    try:
        bind_params(pipeline["plan"], {}, spec.interval_params(spec.anchor_at), "catch-up")
    except ValidationFailed:
        return False
    return True


def catch_up_schedule(
    cur: Cursor, schedule_id: str, now: datetime, *, new_id: Callable[[], uuid.UUID] = uuid.uuid4
) -> CatchUp:
    """Run every interval schedule `schedule_id` missed up to `now` (aware); see the module."""
    row = fetch_one(cur, "lock_schedule", {"schedule_id": str(schedule_id)})
    if row is None or row["deleted_at"] is not None:
        return CatchUp()
    spec = ScheduleSpec.from_row(row)
    next_fire, now = row["next_fire_at"].astimezone(UTC), now.astimezone(UTC)
    times = spec.fires_between(next_fire, now, MAX_RANGE_VALUES)  # the latest, if more
    if not times:
        return CatchUp()
    live = {"pipeline_id": spec.pipeline_id, "include_deleted": False}
    pipeline = fetch_one(cur, "get_pipeline", live)
    if len(times) == 1 or pipeline is None or pipeline["paused"] or not _fits(pipeline, spec):
        return CatchUp(fire=fire_schedule(cur, spec.id, times[-1], now))
    values = [t.strftime(INTERVAL_FORMAT) for t in times]
    interval = (spec.id, int(spec.period.total_seconds()))
    backfill_id = insert_backfill(
        cur, spec.pipeline_id, INTERVAL_PARAM, values, PRINCIPAL, interval=interval, new_id=new_id
    )
    execute(
        cur,
        "record_schedule_fire",
        {
            "schedule_id": spec.id,
            "fired_at": times[-1],
            "run_id": None,
            "skip_reason": None,
            "backfill_id": backfill_id,
            "next_fire_at": spec.next_fire_after(max(times[-1], now)),
        },
    )
    admitted = admit_waiting(cur, new_id=new_id)
    return CatchUp(backfill_id, len(values), admitted)
