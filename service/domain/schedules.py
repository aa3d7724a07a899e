"""Schedules: UTC intervals (`every_minutes`) or a daily time (`daily_at`) that fire runs of a
pipeline, or a glob whose arriving files each make a run (`watch`: service/domain/watches.py
and the watcher, service/watcher.py). The API and the console create and soft-delete them;
the scheduler (`service.scheduler`, the alarm clock) loads the live clock schedules and
fires them through `fire_schedule`. See docs/schedules.md.

Every function takes the caller's cursor and runs inside the caller's transaction, writing
its audit row there. A fire locks the schedule row first, so a concurrent delete either wins
before it (nothing fires) or waits; then it admits a run with the fire's trigger key
(`schedule:<id>:<UTC fire time>`, idempotent per fire) through `service.domain.runs`, which
takes the admission lock. After COMMIT the caller wakes the dag-advancer when the admission
says so."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from dag import interval_values
from service.domain.audit import insert_audit
from service.domain.db import Cursor, execute, fetch_all, fetch_one
from service.domain.runs import Admission, admit_run
from service.domain.watches import check_watch
from service.errors import Conflict, NotFound, ValidationFailed
from service.tracing import RunTrace

PRINCIPAL = "scheduler"  # who the audit trail names for schedule fires
CATCHUP_LATEST = "latest"  # missed fires coalesce into one run, for the latest (default)
CATCHUP_ALL = "all"  # every missed interval runs, through a backfill (service.domain.catchup)


class FireSkip(StrEnum):
    """Why a fire made no run (`schedules.last_skip_reason`, the outcome of
    `etl_schedule_fires_total`)."""

    PAUSED = "paused"  # the pipeline is paused: its schedules create no runs
    PLAN_INVALID = "plan_invalid"  # its current revision no longer passes validation


# The admission's refusals that skip a fire (recorded, not retried), by Conflict code.
# A plan whose parameter has no default cannot run from a schedule: `plan_invalid` too.
_SKIPS = {
    "pipeline_paused": FireSkip.PAUSED,
    "plan_invalid": FireSkip.PLAN_INVALID,
    "invalid_params": FireSkip.PLAN_INVALID,
}


def _caught_up(row: dict, fire_time: datetime) -> bool:
    """True when a catch-up backfill (`catchup: all`) already holds the fire at
    `fire_time`: it recorded the fires up to `last_fired_at` without a run of their own."""
    last = row.get("last_fired_at")
    return (
        row.get("last_backfill_id") is not None
        and row["last_run_id"] is None
        and row["last_skip_reason"] is None
        and last is not None
        and fire_time <= last
    )


def trigger_key(schedule_id: str, fire_time: datetime) -> str:
    """`schedule:<id>:<fire time in UTC to the second>`, e.g.
    `schedule:1b9d...:2026-11-29T13:05:00Z`. Fires of one schedule are at least 5 minutes
    apart, so dropping sub-second digits never merges two fires."""
    return f"schedule:{schedule_id}:{fire_time.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def next_fire_at(
    *, every_minutes: int | None, daily_at: str | None, anchor_at: datetime, now: datetime
) -> datetime:
    """The first fire strictly after `now` (aware, UTC): `anchor_at + k * every_minutes`
    for the smallest k >= 1, or the next `daily_at` ("HH:MM") in UTC."""
    if every_minutes is not None:
        period = timedelta(minutes=every_minutes)
        k = max(1, math.floor((now - anchor_at) / period) + 1)
        return anchor_at + k * period
    if daily_at is None:
        raise ValueError("a schedule needs every_minutes or daily_at")
    hour, minute = (int(part) for part in daily_at.split(":"))
    fire = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    return fire if fire > now else fire + timedelta(days=1)


@dataclass(frozen=True)
class ScheduleSpec:
    """One live row of `schedules` (they are never edited, only created and deleted)."""

    id: str
    pipeline_id: str
    every_minutes: int | None
    daily_at: str | None
    anchor_at: datetime
    catchup: str = "latest"  # after downtime: `latest` (one run) or `all` (a backfill)

    @classmethod
    def from_row(cls, row: dict) -> ScheduleSpec:
        return cls(
            id=str(row["id"]),
            pipeline_id=str(row["pipeline_id"]),
            every_minutes=row["every_minutes"],
            daily_at=row["daily_at"],
            anchor_at=row["anchor_at"].astimezone(UTC),
            catchup=row.get("catchup") or CATCHUP_LATEST,
        )

    @property
    def period(self) -> timedelta:
        if self.every_minutes is not None:
            return timedelta(minutes=self.every_minutes)
        return timedelta(days=1)

    def next_fire_after(self, now: datetime) -> datetime:
        """The first fire strictly after `now` (`next_fire_at`, the API's rule)."""
        return next_fire_at(
            every_minutes=self.every_minutes,
            daily_at=self.daily_at,
            anchor_at=self.anchor_at,
            now=now.astimezone(UTC),
        )

    def interval_params(self, fire_time: datetime) -> dict[str, str]:
        """The built-in values of the run of the fire at `fire_time`: the fire closes the
        interval [fire - period, fire) and processes it (docs/schedules.md); `logical_date`
        is the interval's start date."""
        return interval_values(fire_time, self.period)

    def fires_between(self, first: datetime, last: datetime, limit: int) -> list[datetime]:
        """The fire times from `first` to `last` inclusive, ascending; the latest `limit`
        of them when there are more. An `every_minutes` schedule's first fire is one period
        after its anchor; a `daily_at` one's grid goes back without end."""
        fire = self.latest_fire_at(last)
        times: list[datetime] = []
        while fire is not None and fire >= first and len(times) < limit:
            times.append(fire)
            fire = fire - self.period
            if self.every_minutes is not None and fire <= self.anchor_at:
                break
        return times[::-1]

    def latest_fire_at(self, now: datetime) -> datetime | None:
        """The latest fire time at or before `now`, or None before the first fire."""
        latest = self.next_fire_after(now) - self.period
        if self.every_minutes is not None and latest <= self.anchor_at:
            return None  # the anchor itself is not a fire: the first is anchor + period
        return latest


def create_schedule(
    cur: Cursor,
    pipeline_id: str,
    body: dict,
    principal: str,
    *,
    schedule_id: str,
    now: datetime,
    request_id: str,
) -> dict:
    """Insert a schedule of `pipeline_id` from a loaded `ScheduleCreateSchema` body, with its
    audit row; returns the schedule row. `NotFound` for an unknown or deleted pipeline;
    `ValidationFailed` naming `watch` for a watch schedule of a plan that declares no string
    parameter `file` (`service.domain.watches.check_watch`). The live pipeline row is locked
    first, as a delete locks it: a delete in flight commits first (then this finds no
    pipeline) or waits, so no schedule outlives its pipeline."""
    every, daily, watch = body.get("every_minutes"), body.get("daily_at"), body.get("watch")
    params = {
        "id": schedule_id,
        "pipeline_id": pipeline_id,
        "every_minutes": every,
        "daily_at": daily,
        "watch": watch,
        "anchor_at": now,
        "next_fire_at": None
        if watch is not None
        else next_fire_at(every_minutes=every, daily_at=daily, anchor_at=now, now=now),
        "catchup": body.get("catchup") or CATCHUP_LATEST,
        "created_by": principal,
    }
    if fetch_one(cur, "lock_pipeline", {"pipeline_id": pipeline_id}) is None:
        raise NotFound(f"pipeline {pipeline_id} not found")
    if watch is not None:
        live = {"pipeline_id": pipeline_id, "include_deleted": False}
        pipeline = fetch_one(cur, "get_pipeline", live)
        check_watch(pipeline and pipeline["plan"], watch)
    row = fetch_one(cur, "insert_schedule", params)
    assert row is not None
    kind = ("every_minutes", "daily_at", "catchup") if watch is None else ("watch",)
    what = {k: params[k] for k in ("pipeline_id", *kind)}
    insert_audit(
        cur,
        principal=principal,
        action="schedule.create",
        entity_type="schedule",
        entity_id=row["id"],
        details=what,
        trace_id=request_id,
    )
    return row


def delete_schedule(
    cur: Cursor, pipeline_id: str, schedule_id: str, principal: str, *, request_id: str
) -> None:
    """Soft-delete a live schedule of `pipeline_id`, with its audit row; `NotFound` if
    unknown or already deleted."""
    params = {"pipeline_id": pipeline_id, "schedule_id": schedule_id}
    if fetch_one(cur, "delete_schedule", params) is None:
        raise NotFound(f"schedule {schedule_id} of pipeline {pipeline_id} not found")
    insert_audit(
        cur,
        principal=principal,
        action="schedule.delete",
        entity_type="schedule",
        entity_id=schedule_id,
        details={"pipeline_id": pipeline_id},
        trace_id=request_id,
    )


def list_live_schedules(cur: Cursor) -> list[dict]:
    """Every schedule that has not been deleted, of a live pipeline (what the scheduler
    should have as jobs)."""
    return fetch_all(cur, "list_live_schedules")


@dataclass(frozen=True)
class Fire:
    """A recorded fire: the schedule, and either the admission of its run or why it made
    none (`skip`)."""

    spec: ScheduleSpec
    admission: Admission | None
    skip: FireSkip | None = None


def fire_schedule(
    cur: Cursor,
    schedule_id: str,
    fire_time: datetime,
    now: datetime,
    *,
    trace: RunTrace | None = None,
) -> Fire | None:
    """Fire schedule `schedule_id` for `fire_time` (aware): lock the schedule row, admit a
    run with the fire's trigger key and record the fire (`last_fired_at`, `last_run_id`,
    `last_skip_reason`, `next_fire_at`). Idempotent per (schedule, fire time): a repeat
    admits the `existing` run; a new run is in `trace` (the fire's span). None, firing
    nothing, when the schedule is deleted or gone; no admission (the fire recorded without a
    run, with its `FireSkip`) when the pipeline is paused or its revision is no valid plan."""
    fire_time = fire_time.astimezone(UTC)
    row = fetch_one(cur, "lock_schedule", {"schedule_id": str(schedule_id)})
    if row is None or row["deleted_at"] is not None:
        return None
    if row["every_minutes"] is None and row["daily_at"] is None:
        return None  # a watch schedule: it never fires on the clock (service/watcher.py)
    spec = ScheduleSpec.from_row(row)
    if _caught_up(row, fire_time):
        return Fire(spec, None)
    skip: FireSkip | None = None
    try:
        key = trigger_key(spec.id, fire_time)
        builtins = spec.interval_params(fire_time)
        admission = admit_run(cur, spec.pipeline_id, key, PRINCIPAL, builtins=builtins, trace=trace)
    except (Conflict, ValidationFailed) as exc:
        if exc.code not in _SKIPS:
            raise
        admission, skip = None, _SKIPS[exc.code]  # recorded all the same: no retry each reconcile
    following = spec.next_fire_after(max(fire_time, now))
    execute(
        cur,
        "record_schedule_fire",
        {
            "schedule_id": spec.id,
            "fired_at": fire_time,
            "run_id": admission.run["id"] if admission else None,
            "skip_reason": skip and str(skip),
            "backfill_id": None,
            "next_fire_at": following,
        },
    )
    return Fire(spec, admission, skip)
