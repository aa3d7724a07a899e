"""The scheduler: turns the UTC schedules of the `schedules` table into runs.

The table is the truth; APScheduler (a `BackgroundScheduler` with a memory job store) is only
the alarm clock. `Scheduler.start()` loads the live schedules and then reconciles every
`reload_s` seconds, so a schedule created or deleted through the API is followed within a
few seconds without a restart. Every fire goes through `service.domain.runs.admit_run` with the
trigger key `schedule:<schedule id>:<fire time, UTC, YYYY-MM-DDTHH:MM:SSZ>`: a fire processed
twice (two coordinators, a restart, a retried fire) finds the existing run and creates
nothing. Missed fires (the coordinator was down) coalesce into one run for the latest missed
fire time, or, for a schedule with `"catchup": "all"`, become one backfill of every missed
interval (`service.domain.catchup`). docs/schedules.md states the semantics.

Run it only in the coordinator process (`etl coordinator`), never inside gunicorn workers:
two workers would be two schedulers (harmless thanks to the trigger keys, but wasteful)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg2
import psycopg2.extensions
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.job import Job
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from opentelemetry import trace
from opentelemetry.trace import Tracer

from actors import param_attributes, send_advance_run
from ddl import Cursor, KeptSession, connector
from service.config import Config
from service.domain.catchup import CatchUp, catch_up_schedule
from service.domain.runs import Admission, AdmissionOutcome
from service.domain.schedules import (
    CATCHUP_ALL,
    FireSkip,
    ScheduleSpec,
    fire_schedule,
    list_live_schedules,
    trigger_key,
)
from service.tracing import trigger_span

log = logging.getLogger("etl.scheduler")


DEFAULT_RELOAD_S = 2.0
# A known schedule whose next_fire_at is this far behind the clock missed its fire while we
# were running (e.g. the database was down at the fire time): reconcile fires it then.
DEFAULT_OVERDUE_AFTER_S = 10.0
# APScheduler submits a job once its own clock reached the fire time; this slack keeps a
# microsecond of clock disagreement from pointing the job at the previous fire (schedules are
# at least 5 minutes apart, so it can never reach the next one).
_JOB_CLOCK_SLACK = timedelta(seconds=1)
# What the log says of a fire that made no run, by its reason (`skip_reason` in the line).
_SKIP_TEXT = {
    FireSkip.PAUSED: "skipped (paused): the pipeline is paused",
    FireSkip.PLAN_INVALID: "skipped (plan_invalid): its current revision is not a valid plan",
}

Connect = Callable[[], psycopg2.extensions.connection]
Wake = Callable[[str, str], None]


def schedule_trigger(spec: ScheduleSpec) -> BaseTrigger:
    """The APScheduler trigger firing at exactly the times `spec.next_fire_after` yields."""
    if spec.every_minutes is not None:
        # Start one period after the anchor: IntervalTrigger fires at start_date itself,
        # the API's first fire is anchor + period.
        return IntervalTrigger(
            minutes=spec.every_minutes, start_date=spec.anchor_at + spec.period, timezone=UTC
        )
    assert spec.daily_at is not None
    hour, minute = (int(part) for part in spec.daily_at.split(":"))
    return CronTrigger(hour=hour, minute=minute, second=0, timezone=UTC)


class Scheduler:
    """Schedules of the database as APScheduler jobs, and their fires as admitted runs.

    `connect()` opens a new psycopg2 connection (the scheduler owns and closes it);
    `wake(run_id, trace_id)` is called after COMMIT for a run that needs the dag-advancer;
    `now()` is the clock (aware, UTC) used for fire times and catch-up. APScheduler itself
    runs on the real clock, so an injected clock only matters to the calls made directly.
    `tracer` makes the fires' spans (default: the process's provider)."""

    def __init__(
        self,
        connect: Connect,
        wake: Wake,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        reload_s: float = DEFAULT_RELOAD_S,
        overdue_after_s: float = DEFAULT_OVERDUE_AFTER_S,
        fire_threads: int = 4,
        tracer: Tracer | None = None,
    ):
        self._connect = connect
        self._tracer = tracer or trace.get_tracer("etl.scheduler")
        self._wake = wake
        self._now = now
        self.reload_s = reload_s
        self.overdue_after = timedelta(seconds=overdue_after_s)
        self._aps = BackgroundScheduler(
            timezone=UTC,
            jobstores={"default": MemoryJobStore()},
            executors={"default": ThreadPoolExecutor(fire_threads)},
            job_defaults={
                # A late wake-up (suspended host, busy pool) runs once, however late, for
                # the latest due time; never two fires of one schedule at once.
                "coalesce": True,
                "misfire_grace_time": None,
                "max_instances": 1,
            },
        )
        self._specs: dict[str, ScheduleSpec] = {}  # touched only by `reconcile`
        self._reconcile_lock = threading.Lock()
        self._stop = threading.Event()
        self._loop: threading.Thread | None = None
        self._session = KeptSession(connect)  # reconcile's session

    # --- lifecycle ---
    def start(self) -> None:
        """Load the schedules (firing missed ones once), then follow the table every
        `reload_s`. A database that is down at start is retried by the loop, not fatal."""
        self._aps.start()
        self._reconcile_logged()
        self._loop = threading.Thread(target=self._follow, name="scheduler-reload", daemon=True)
        self._loop.start()
        log.info(
            "scheduler started: %d schedules, reload every %s s", len(self._specs), self.reload_s
        )

    def shutdown(self) -> None:
        """Stop following the table, let running fires finish, drop the jobs."""
        self._stop.set()
        if self._loop is not None:
            self._loop.join(timeout=self.reload_s + 30)
        if self._aps.running:
            self._aps.shutdown(wait=True)
        with self._reconcile_lock:
            self._session.close()
        log.info("scheduler stopped")

    def _follow(self) -> None:
        while not self._stop.wait(self.reload_s):
            self._reconcile_logged()

    def _reconcile_logged(self) -> None:
        try:
            self.reconcile()
        except psycopg2.Error as exc:
            log.warning("scheduler: reloading schedules failed: %s", str(exc).strip())
        except Exception:
            log.exception("scheduler: reloading schedules failed")

    # --- following the table ---
    def reconcile(self) -> None:
        """Make the jobs match the live schedules: add new ones, replace changed ones,
        remove deleted ones. A schedule seen for the first time whose `next_fire_at` has
        passed (the coordinator was down) fires once for its latest missed fire time; a
        known one still overdue after `overdue_after_s` (its fire failed) is fired again."""
        with self._reconcile_lock:
            rows = self._load_live()
            now = self._now().astimezone(UTC)
            live = {str(row["id"]): row for row in rows}
            for schedule_id in set(self._specs) - set(live):
                self._remove_job(schedule_id)
            for schedule_id, row in live.items():
                spec = ScheduleSpec.from_row(row)
                known = self._specs.get(schedule_id)
                due = row["next_fire_at"].astimezone(UTC)
                grace = timedelta(0) if known is None else self.overdue_after
                if due + grace <= now:
                    self._catch_up(spec, now)
                if known != spec:
                    self._add_job(spec)

    def _load_live(self) -> list[dict]:
        with self._session.transaction() as cur:  # ended at once: no idle transaction
            return list_live_schedules(cur)

    def _catch_up(self, spec: ScheduleSpec, now: datetime) -> None:
        fire_time = spec.latest_fire_at(now)
        if fire_time is None:
            return
        if spec.catchup == CATCHUP_ALL:
            log.info("schedule %s missed fires; catching up every one", spec.id,
                     extra={"pipeline_id": spec.pipeline_id})  # fmt: skip
        else:
            log.info(
                "schedule %s missed its fire; catching up once for %s",
                spec.id,
                trigger_key(spec.id, fire_time),
                extra={"pipeline_id": spec.pipeline_id},
            )
        try:
            if spec.catchup == CATCHUP_ALL:
                self.catch_up_all(spec.id, now)
            else:
                self.fire(spec.id, fire_time)
        except psycopg2.Error as exc:  # retried by a later reconcile (still overdue)
            log.warning("schedule %s: catch-up fire failed: %s", spec.id, str(exc).strip())
        except Exception:  # one broken schedule must not stop the others from loading
            log.exception("schedule %s: catch-up fire failed", spec.id)

    def _add_job(self, spec: ScheduleSpec) -> None:
        self._aps.add_job(
            self._run_job,
            trigger=schedule_trigger(spec),
            args=(spec,),
            id=spec.id,
            name=f"schedule {spec.id}",
            replace_existing=True,
        )
        self._specs[spec.id] = spec
        log.info("schedule %s loaded", spec.id, extra={"pipeline_id": spec.pipeline_id})

    def _remove_job(self, schedule_id: str) -> None:
        spec = self._specs.pop(schedule_id)
        if self._aps.get_job(schedule_id) is not None:
            self._aps.remove_job(schedule_id)
        log.info("schedule %s removed", schedule_id, extra={"pipeline_id": spec.pipeline_id})

    def job(self, schedule_id: str) -> Job | None:
        """The APScheduler job of a schedule (its trigger and `next_run_time`), or None."""
        return self._aps.get_job(str(schedule_id))

    def scheduled_ids(self) -> set[str]:
        """The ids of the schedules that currently have a job."""
        return {job.id for job in self._aps.get_jobs()}

    # --- firing ---
    def _run_job(self, spec: ScheduleSpec) -> None:
        """APScheduler's callback. The scheduled fire time is recomputed from the schedule,
        not read from `job.next_run_time` (already the next fire, and racy): the latest
        fire time at or before the clock is the time APScheduler woke us for, or a later
        one when it woke late and coalesced."""
        fire_time = spec.latest_fire_at(self._now() + _JOB_CLOCK_SLACK)
        if fire_time is None:
            return
        try:
            self.fire(spec.id, fire_time)
        except psycopg2.Error as exc:  # reconcile fires it again once overdue
            log.warning("schedule %s: fire failed: %s", spec.id, str(exc).strip())
        except Exception:
            log.exception("schedule %s: fire failed", spec.id)

    def fire(self, schedule_id: str, fire_time: datetime) -> Admission | None:
        """Fire schedule `schedule_id` for `fire_time` (aware): in one transaction, lock the
        schedule row, admit a run with the fire's trigger key and record the fire
        (`last_fired_at`, `last_run_id`, `next_fire_at`). Idempotent per (schedule, fire
        time): a repeat returns the `existing` admission. A skipped admission (`queue_full`,
        `busy`) is recorded as a skipped run. Returns None when the schedule is deleted or
        gone (nothing fires), or when the pipeline is paused or its revision is no valid
        plan (the fire is recorded without a run, with its `last_skip_reason`, and logged).
        After COMMIT, wakes the dag-advancer for a created run."""
        fire_time = fire_time.astimezone(UTC)
        key = trigger_key(schedule_id, fire_time)
        attributes = {"etl.schedule_id": str(schedule_id), "etl.trigger_key": key}
        # the fire's span is the trigger span of its run: a root, a new trace each fire
        with (
            trigger_span(self._tracer, "fire_schedule", attributes=attributes) as trigger,
            self._transaction() as cur,
        ):
            fired = fire_schedule(cur, schedule_id, fire_time, self._now(), trace=trigger.run_trace)
            if fired is not None and fired.admission is not None:
                trigger.span.set_attributes(param_attributes(fired.admission.run.get("params")))
        if fired is None:
            log.info("schedule %s is deleted; %s does not fire", schedule_id, key)
            return None
        spec, admission = fired.spec, fired.admission
        if admission is None:
            log.warning(
                "%s makes no run: %s",
                key,
                _SKIP_TEXT.get(fired.skip, "no admission") if fired.skip else "no admission",
                extra={"pipeline_id": spec.pipeline_id, "skip_reason": fired.skip},
            )
            return None
        run = admission.run
        context = {
            "run_id": str(run["id"]),
            "trace_id": run["trace_id"],
            "pipeline_id": spec.pipeline_id,
            "status": run["status"],
        }
        if admission.outcome == AdmissionOutcome.SKIPPED:
            log.warning("%s skipped: %s", key, admission.reason, extra=context)
        else:
            log.info("%s: %s run", key, admission.outcome, extra=context)
        if admission.needs_wake:
            self._wake_run(str(run["id"]), run["trace_id"])
        return admission

    def catch_up_all(self, schedule_id: str, now: datetime) -> CatchUp:
        """Run every interval schedule `schedule_id` missed up to `now`, in one transaction
        (`service.domain.catchup`): a backfill of the missed fire times, or one ordinary
        fire. After COMMIT, wakes the dag-advancer for the runs admitted."""
        with self._transaction() as cur:
            caught = catch_up_schedule(cur, schedule_id, now)
        if caught.backfill_id is not None:
            log.info(
                "schedule %s: backfill %s of %d missed intervals",
                schedule_id,
                caught.backfill_id,
                caught.total,
                extra={"backfill_id": caught.backfill_id},
            )
        admitted = list(caught.admitted)
        if caught.fire is not None and caught.fire.admission is not None:
            admitted.append(caught.fire.admission)
        for admission in admitted:
            if admission.needs_wake:
                self._wake_run(str(admission.run["id"]), admission.run["trace_id"])
        return caught

    def _wake_run(self, run_id: str, trace_id: str) -> None:
        try:
            self._wake(run_id, trace_id)
        except Exception:  # the coordinator's sweep re-sends lost wake-ups
            log.warning(
                "wake-up of the dag-advancer failed; the sweep will re-send it",
                exc_info=True,
                extra={"run_id": run_id, "trace_id": trace_id},
            )

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A cursor on a fresh connection: COMMIT when the block ends, ROLLBACK when it
        raises; the connection is closed either way (fires are minutes apart)."""
        conn = self._connect()
        try:
            with conn, conn.cursor(cursor_factory=Cursor) as cur:
                yield cur
        finally:
            conn.close()


def build_scheduler(cfg: Config, broker: Any) -> Scheduler:
    """The coordinator's scheduler: fires admit runs in `cfg.database_url` and wake the
    dag-advancer through `broker` (started by `run_coordinator`)."""

    def wake(run_id: str, trace_id: str) -> None:
        send_advance_run(broker, run_id, trace_id)

    return Scheduler(connector(cfg.database_url, "etl-scheduler"), wake)
