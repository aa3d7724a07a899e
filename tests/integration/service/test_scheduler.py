"""The scheduler against a real PostgreSQL: idempotent fires, skipped fires, following the
table without a restart, catch-up after downtime, deleted schedules, and the APScheduler
wiring (triggers and next run times agree with the table)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import psycopg2
import psycopg2.extras
import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_span_id, format_trace_id

from actors import build_broker
from service.config import Config
from service.domain.pipelines import delete_pipeline
from service.domain.schedules import ScheduleSpec, trigger_key
from service.scheduler import Scheduler, build_scheduler, schedule_trigger

FIVE_MIN = timedelta(minutes=5)


class Clock:
    """A settable UTC clock."""

    def __init__(self, at: datetime):
        self.at = at

    def __call__(self) -> datetime:
        return self.at


class Wakes:
    """Records wake-ups (thread-safe)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, run_id: str, trace_id: str) -> None:
        with self._lock:
            self.calls.append((run_id, trace_id))


@pytest.fixture
def db(db_url: str) -> Iterator[psycopg2.extensions.connection]:
    c = psycopg2.connect(db_url, options="-c timezone=UTC")
    c.autocommit = True
    yield c
    c.close()


@pytest.fixture
def wakes() -> Wakes:
    return Wakes()


def real_now() -> datetime:
    return datetime.now(UTC)


def make_scheduler(db_url: str, wake: Wakes, **kwargs) -> Scheduler:
    return Scheduler(lambda: psycopg2.connect(db_url), wake, **kwargs)


def sql(db, query: str, *args) -> list[tuple]:
    with db.cursor() as cur:
        cur.execute(query, args or None)
        return cur.fetchall() if cur.description else []


# A valid plan: a trigger of an invalid one is refused (409 plan_invalid).
READ = {"name": "read", "type": "ingest", "config": {"source": "table", "table": "t"}}
PLAN = {"steps": [READ]}


def make_pipeline(db) -> str:
    pipeline_id = str(uuid.uuid4())
    sql(db, "INSERT INTO pipelines (id, name, revision) VALUES (%s, %s, 1)", pipeline_id,
        f"p-{pipeline_id[:8]}")  # fmt: skip
    sql(db, "INSERT INTO revisions (pipeline_id, number, plan, created_by) "
        "VALUES (%s, 1, %s, 'test')", pipeline_id, json.dumps(PLAN))  # fmt: skip
    return pipeline_id


def make_schedule(
    db,
    pipeline_id: str,
    *,
    anchor_at: datetime,
    every_minutes: int | None = None,
    daily_at: str | None = None,
    next_fire_at: datetime | None = None,
    deleted: bool = False,
) -> str:
    """A schedule row as the API writes it; `next_fire_at` defaults to the first fire."""
    schedule_id = str(uuid.uuid4())
    if next_fire_at is None:
        spec = ScheduleSpec(schedule_id, pipeline_id, every_minutes, daily_at, anchor_at)
        next_fire_at = spec.next_fire_after(anchor_at)
    sql(db, "INSERT INTO schedules (id, pipeline_id, every_minutes, daily_at, anchor_at, "
        "next_fire_at, created_by, created_at, deleted_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, 'admin', %s, CASE WHEN %s THEN now() END)",
        schedule_id, pipeline_id, every_minutes, daily_at, anchor_at, next_fire_at, anchor_at,
        deleted)  # fmt: skip
    return schedule_id


def runs_of(db, pipeline_id: str) -> list[tuple]:
    """(id, status, reason, trigger_key, created_by) of a pipeline's runs, oldest first."""
    return sql(db, "SELECT id::text, status, reason, trigger_key, created_by FROM runs "
               "WHERE pipeline_id = %s ORDER BY queue_seq", pipeline_id)  # fmt: skip


def schedule_row(db, schedule_id: str) -> dict:
    (row,) = sql(db, "SELECT next_fire_at, last_fired_at, last_run_id::text FROM schedules "
                 "WHERE id = %s", schedule_id)  # fmt: skip
    return {"next_fire_at": row[0], "last_fired_at": row[1], "last_run_id": row[2]}


def skip_reason(db, schedule_id: str) -> str | None:
    """Why the schedule's newest fire made no run (None: it admitted one)."""
    return sql(db, "SELECT last_skip_reason FROM schedules WHERE id = %s", schedule_id)[0][0]


def wait_until(predicate, timeout_s: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def close_to(a: datetime | None, b: datetime, tolerance_s: float = 0.001) -> bool:
    return a is not None and abs((a - b).total_seconds()) <= tolerance_s


ANCHOR = datetime(2026, 11, 29, 13, 0, 0, tzinfo=UTC)


def test_trigger_key_is_utc_iso_to_the_second() -> None:
    utc = datetime(2026, 11, 29, 13, 5, 0, 123456, tzinfo=UTC)
    assert trigger_key("abc", utc) == "schedule:abc:2026-11-29T13:05:00Z"
    cet = datetime(2026, 11, 29, 14, 5, tzinfo=timezone(timedelta(hours=1)))
    assert trigger_key("abc", cet) == "schedule:abc:2026-11-29T13:05:00Z"


def test_fire_twice_gives_one_run_and_one_wake(db_url, db, wakes) -> None:
    pipeline_id = make_pipeline(db)
    schedule_id = make_schedule(db, pipeline_id, anchor_at=ANCHOR, every_minutes=5)
    fire_time = ANCHOR + FIVE_MIN
    scheduler = make_scheduler(db_url, wakes, now=Clock(fire_time + timedelta(seconds=1)))

    first = scheduler.fire(schedule_id, fire_time)
    again = scheduler.fire(schedule_id, fire_time)

    assert first is not None and again is not None
    assert (first.outcome, again.outcome) == ("created", "existing")
    assert again.run["id"] == first.run["id"]
    key = f"schedule:{schedule_id}:2026-11-29T13:05:00Z"
    assert runs_of(db, pipeline_id) == [(str(first.run["id"]), "queued", None, key, "scheduler")]
    assert wakes.calls == [(str(first.run["id"]), first.run["trace_id"])]


def test_concurrent_fires_from_two_schedulers_give_one_run(db_url, db, wakes) -> None:
    pipeline_id = make_pipeline(db)
    schedule_id = make_schedule(db, pipeline_id, anchor_at=ANCHOR, every_minutes=5)
    fire_time = ANCHOR + FIVE_MIN
    clock = Clock(fire_time)
    schedulers = [make_scheduler(db_url, wakes, now=clock) for _ in range(2)]
    barrier = threading.Barrier(8)
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def fire(scheduler: Scheduler) -> None:
        try:
            barrier.wait()
            admission = scheduler.fire(schedule_id, fire_time)
            assert admission is not None
            outcomes.append(admission.outcome)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=fire, args=(schedulers[i % 2],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)

    assert errors == []
    assert sorted(outcomes) == ["created"] + ["existing"] * 7
    runs = runs_of(db, pipeline_id)
    assert [r[3] for r in runs] == [trigger_key(schedule_id, fire_time)]
    assert [c[0] for c in wakes.calls] == [runs[0][0]]


def test_fire_while_queue_full_records_skipped_run_without_wake(db_url, db, wakes) -> None:
    pipeline_id = make_pipeline(db)
    for i, status in enumerate(("running", "queued", "queued", "queued")):
        sql(db, "INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id, "
            "created_by) VALUES (%s, %s, 1, %s, %s, 'trace', 'test')",
            str(uuid.uuid4()), pipeline_id, status, f"manual-{i}")  # fmt: skip
    schedule_id = make_schedule(db, pipeline_id, anchor_at=ANCHOR, every_minutes=5)
    fire_time = ANCHOR + FIVE_MIN
    scheduler = make_scheduler(db_url, wakes, now=Clock(fire_time))

    admission = scheduler.fire(schedule_id, fire_time)

    assert admission is not None
    assert (admission.outcome, admission.reason) == ("skipped", "queue_full")
    skipped = [r for r in runs_of(db, pipeline_id) if r[3] == trigger_key(schedule_id, fire_time)]
    assert [r[1:3] for r in skipped] == [("skipped", "queue_full")]
    assert wakes.calls == []
    assert schedule_row(db, schedule_id)["last_run_id"] == skipped[0][0]
    # The skipped fire is also in the audit trail, like an API trigger.
    audit = sql(db, "SELECT principal, details->>'outcome' FROM audit WHERE entity_id = %s",
                skipped[0][0])  # fmt: skip
    assert audit == [("scheduler", "skipped")]


def test_fire_updates_next_and_last_fire(db_url, db, wakes) -> None:
    pipeline_id = make_pipeline(db)
    schedule_id = make_schedule(db, pipeline_id, anchor_at=ANCHOR, every_minutes=5)
    fire_time = ANCHOR + FIVE_MIN
    assert schedule_row(db, schedule_id)["next_fire_at"] == fire_time
    scheduler = make_scheduler(db_url, wakes, now=Clock(fire_time + timedelta(seconds=2)))

    admission = scheduler.fire(schedule_id, fire_time)

    assert admission is not None
    assert schedule_row(db, schedule_id) == {
        "next_fire_at": fire_time + FIVE_MIN,
        "last_fired_at": fire_time,
        "last_run_id": str(admission.run["id"]),
    }


def test_deleted_schedule_never_fires(db_url, db, wakes) -> None:
    pipeline_id = make_pipeline(db)
    now = real_now()
    # Deleted while overdue: neither catch-up at load nor a direct fire creates a run.
    schedule_id = make_schedule(
        db, pipeline_id, anchor_at=now - timedelta(minutes=17), every_minutes=5, deleted=True
    )
    scheduler = make_scheduler(db_url, wakes, now=Clock(now), reload_s=0.2)
    scheduler.start()
    try:
        assert scheduler.scheduled_ids() == set()
        assert scheduler.fire(schedule_id, now - timedelta(minutes=2)) is None
    finally:
        scheduler.shutdown()
    assert runs_of(db, pipeline_id) == []
    assert wakes.calls == []
    assert schedule_row(db, schedule_id)["last_fired_at"] is None


def test_create_and_delete_take_effect_without_restart(db_url, db, wakes) -> None:
    pipeline_id = make_pipeline(db)
    scheduler = make_scheduler(db_url, wakes, reload_s=0.2)
    scheduler.start()
    try:
        assert scheduler.scheduled_ids() == set()
        now = real_now()
        every = make_schedule(db, pipeline_id, anchor_at=now, every_minutes=5)
        daily = make_schedule(db, pipeline_id, anchor_at=now, daily_at="03:30")

        assert wait_until(lambda: scheduler.scheduled_ids() == {every, daily})
        job = scheduler.job(every)
        assert job is not None and isinstance(job.trigger, IntervalTrigger)
        assert job.trigger.interval == FIVE_MIN
        assert close_to(job.next_run_time, schedule_row(db, every)["next_fire_at"])
        job = scheduler.job(daily)
        assert job is not None and isinstance(job.trigger, CronTrigger)
        assert str(job.trigger.timezone) == "UTC"
        assert job.next_run_time == schedule_row(db, daily)["next_fire_at"]
        assert (job.next_run_time.hour, job.next_run_time.minute) == (3, 30)

        sql(db, "UPDATE schedules SET deleted_at = now() WHERE id = %s", every)
        assert wait_until(lambda: scheduler.scheduled_ids() == {daily})
        assert scheduler.job(every) is None
    finally:
        scheduler.shutdown()
    assert runs_of(db, pipeline_id) == []


def test_catch_up_fires_once_for_the_latest_missed_time(db_url, db, wakes) -> None:
    pipeline_id = make_pipeline(db)
    now = real_now()
    anchor = now - timedelta(minutes=17)
    # Never fired; missed anchor+5, +10 and +15 minutes while the coordinator was down.
    schedule_id = make_schedule(db, pipeline_id, anchor_at=anchor, every_minutes=5)
    assert schedule_row(db, schedule_id)["next_fire_at"] == anchor + FIVE_MIN
    latest_missed = anchor + 3 * FIVE_MIN

    scheduler = make_scheduler(db_url, wakes, now=Clock(now), reload_s=0.2)
    scheduler.start()
    try:
        runs = runs_of(db, pipeline_id)
        assert [(r[1], r[3]) for r in runs] == [("queued", trigger_key(schedule_id, latest_missed))]
        row = schedule_row(db, schedule_id)
        assert row == {
            "next_fire_at": anchor + 4 * FIVE_MIN,
            "last_fired_at": latest_missed,
            "last_run_id": runs[0][0],
        }
        assert row["next_fire_at"] > now
        job = scheduler.job(schedule_id)
        assert job is not None and close_to(job.next_run_time, row["next_fire_at"])
        time.sleep(0.5)  # a few reloads: the schedule is no longer overdue
    finally:
        scheduler.shutdown()
    # A restart (or a second coordinator) catching up the same downtime adds nothing.
    again = make_scheduler(db_url, wakes, now=Clock(now))
    again.reconcile()
    assert len(runs_of(db, pipeline_id)) == 1
    assert len(wakes.calls) == 1


def test_job_fires_with_its_scheduled_time(db_url, db, wakes) -> None:
    """The APScheduler job calls `fire` with the fire time it was scheduled for, not the
    clock's time and not the job's (already advanced) next run time."""
    pipeline_id = make_pipeline(db)
    now = real_now()
    schedule_id = make_schedule(db, pipeline_id, anchor_at=now, daily_at="13:05")
    clock = Clock(now)
    scheduler = make_scheduler(db_url, wakes, now=clock)
    scheduler.start()
    try:
        job = scheduler.job(schedule_id)
        assert job is not None
        fire_time = job.next_run_time
        assert fire_time == schedule_row(db, schedule_id)["next_fire_at"]

        clock.at = fire_time + timedelta(seconds=7)  # the thread pool started late
        job.func(*job.args, **job.kwargs)
    finally:
        scheduler.shutdown()

    key = f"schedule:{schedule_id}:{fire_time:%Y-%m-%d}T13:05:00Z"
    assert [r[3] for r in runs_of(db, pipeline_id)] == [key]
    assert schedule_row(db, schedule_id)["next_fire_at"] == fire_time + timedelta(days=1)


def test_trigger_agrees_with_next_fire_after() -> None:
    """APScheduler's fire times are the API's `next_fire_at` chain, so keys computed either
    way match."""
    anchor = datetime(2026, 11, 29, 13, 2, 7, 654321, tzinfo=UTC)
    for every, daily in ((5, None), (1440, None), (None, "00:00"), (None, "23:59")):
        spec = ScheduleSpec("s", "p", every, daily, anchor)
        trigger = schedule_trigger(spec)
        ours = spec.next_fire_after(anchor)
        theirs = trigger.get_next_fire_time(None, anchor)
        for _ in range(5):
            assert close_to(theirs, ours)
            assert spec.latest_fire_at(ours) == ours
            ours = spec.next_fire_after(ours)
            theirs = trigger.get_next_fire_time(theirs, theirs)


def test_overdue_fire_is_retried_by_reconcile(db_url, db, wakes) -> None:
    """A fire that did not happen while running (the database was down at the fire time)
    is fired by a later reload once it is overdue."""
    pipeline_id = make_pipeline(db)
    schedule_id = make_schedule(db, pipeline_id, anchor_at=ANCHOR, every_minutes=5)
    fire_time = ANCHOR + FIVE_MIN
    clock = Clock(ANCHOR + timedelta(minutes=1))
    scheduler = make_scheduler(db_url, wakes, now=clock, overdue_after_s=10)
    scheduler.reconcile()

    clock.at = fire_time + timedelta(seconds=5)  # the job's fire failed; not overdue yet
    scheduler.reconcile()
    assert runs_of(db, pipeline_id) == []

    clock.at = fire_time + timedelta(seconds=11)
    scheduler.reconcile()
    assert [r[3] for r in runs_of(db, pipeline_id)] == [trigger_key(schedule_id, fire_time)]
    assert schedule_row(db, schedule_id)["next_fire_at"] == fire_time + FIVE_MIN
    assert len(wakes.calls) == 1


def test_build_scheduler_wakes_the_advancer_through_the_broker(db_url, db) -> None:
    """The coordinator's factory: a fire's wake-up is an `advance_run` message in the
    Postgres broker for the created run."""
    pipeline_id = make_pipeline(db)
    schedule_id = make_schedule(db, pipeline_id, anchor_at=ANCHOR, every_minutes=5)
    broker = build_broker(db_url, max_connections=2)
    try:
        scheduler = build_scheduler(Config(database_url=db_url, sandbox_url=db_url), broker)
        admission = scheduler.fire(schedule_id, ANCHOR + FIVE_MIN)
        assert admission is not None and admission.outcome == "created"
        scheduler.fire(schedule_id, ANCHOR + FIVE_MIN)  # a repeat sends nothing
    finally:
        broker.close()
    messages = sql(db, "SELECT message->>'actor_name', message->'args'->>0, "
                   "message->'kwargs'->>'trace_id' FROM dramatiq.queue")  # fmt: skip
    assert messages == [("advance_run", str(admission.run["id"]), admission.run["trace_id"])]


def test_a_fire_of_an_invalid_revision_is_recorded_without_a_run(db_url, db, wakes) -> None:
    """Its trigger would be refused (plan_invalid): the fire moves the schedule on, so a
    reconcile does not fire it again and again, and no run is made."""
    pipeline_id = make_pipeline(db)
    sql(db, "INSERT INTO revisions (pipeline_id, number, plan, created_by)"
        " VALUES (%s, 2, '{}', 'hand')", pipeline_id)  # fmt: skip
    sql(db, "UPDATE pipelines SET revision = 2 WHERE id = %s", pipeline_id)
    _assert_fire_makes_no_run(db_url, db, wakes, pipeline_id, "plan_invalid")


def test_a_fire_of_a_paused_pipeline_is_recorded_without_a_run(db_url, db, wakes) -> None:
    pipeline_id = make_pipeline(db)
    sql(db, "UPDATE pipelines SET paused = true WHERE id = %s", pipeline_id)
    schedule_id = _assert_fire_makes_no_run(db_url, db, wakes, pipeline_id, "paused")
    # unpaused, the next fire admits a run and the reason is gone
    sql(db, "UPDATE pipelines SET paused = false WHERE id = %s", pipeline_id)
    scheduler = make_scheduler(db_url, wakes, now=Clock(ANCHOR + 2 * FIVE_MIN))
    assert scheduler.fire(schedule_id, ANCHOR + 2 * FIVE_MIN) is not None
    assert schedule_row(db, schedule_id)["last_run_id"] is not None
    assert skip_reason(db, schedule_id) is None
    # a late duplicate of the older, skipped fire moves nothing back
    sql(db, "UPDATE pipelines SET paused = true WHERE id = %s", pipeline_id)
    scheduler.fire(schedule_id, ANCHOR + FIVE_MIN)
    assert skip_reason(db, schedule_id) is None


def test_a_deleted_pipeline_s_schedules_leave_the_scheduler_and_never_fire(
    db_url, db, wakes
) -> None:
    pipeline_id = make_pipeline(db)
    schedule_id = make_schedule(db, pipeline_id, anchor_at=ANCHOR, every_minutes=5)
    scheduler = make_scheduler(db_url, wakes, now=Clock(ANCHOR + timedelta(minutes=1)))
    scheduler.reconcile()
    assert scheduler.scheduled_ids() == {schedule_id}
    with db.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        delete_pipeline(cur, pipeline_id, "test", request_id="delete")
    scheduler.reconcile()
    assert scheduler.scheduled_ids() == set()
    # a fire already on its way when the delete committed finds the schedule deleted
    assert scheduler.fire(schedule_id, ANCHOR + FIVE_MIN) is None
    assert runs_of(db, pipeline_id) == [] and wakes.calls == []
    assert schedule_row(db, schedule_id)["last_fired_at"] is None


def _assert_fire_makes_no_run(db_url, db, wakes, pipeline_id: str, reason: str) -> str:
    """A due fire of a new 5-minute schedule of the pipeline is recorded with its `reason`,
    moves the schedule on, makes no run and no wake-up, and counts under its reason (a
    paused fire as a skipped trigger too); returns the schedule's id."""
    schedule_id = make_schedule(db, pipeline_id, anchor_at=ANCHOR, every_minutes=5)
    fire_time = ANCHOR + FIVE_MIN
    scheduler = make_scheduler(db_url, wakes, now=Clock(fire_time + timedelta(seconds=1)))
    assert scheduler.fire(schedule_id, fire_time) is None
    row = schedule_row(db, schedule_id)
    assert row["last_fired_at"] == fire_time and row["last_run_id"] is None
    assert skip_reason(db, schedule_id) == reason
    assert row["next_fire_at"] > fire_time
    assert runs_of(db, pipeline_id) == [] and wakes.calls == []
    deltas = sql(db, "SELECT family, labels - 'pipeline' FROM metric_deltas"
                 " WHERE family IN ('etl_schedule_fires_total', 'etl_triggers_skipped_total')"
                 " ORDER BY family")  # fmt: skip
    fires = [("etl_schedule_fires_total", {"outcome": reason})]
    skips = [("etl_triggers_skipped_total", {"reason": "paused"})] if reason == "paused" else []
    assert deltas == fires + skips
    return schedule_id


def test_each_fire_starts_a_trace_its_run_keeps(db_url, db, wakes) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    pipeline_id = make_pipeline(db)
    schedule_id = make_schedule(db, pipeline_id, anchor_at=ANCHOR, every_minutes=5)
    scheduler = make_scheduler(
        db_url, wakes, now=Clock(ANCHOR + 3 * FIVE_MIN), tracer=provider.get_tracer("t")
    )
    first = scheduler.fire(schedule_id, ANCHOR + FIVE_MIN)
    second = scheduler.fire(schedule_id, ANCHOR + 2 * FIVE_MIN)
    assert first is not None and second is not None
    fires = spans.get_finished_spans()
    assert [s.name for s in fires] == ["fire_schedule", "fire_schedule"]
    assert all(s.parent is None for s in fires)  # roots: a fire is nobody else's trace
    for admission, span in zip((first, second), fires, strict=True):
        ctx = span.get_span_context()
        run = sql(db, "SELECT trace_id, parent_span_id FROM runs WHERE id = %s",
                  str(admission.run["id"]))  # fmt: skip
        assert run == [(format_trace_id(ctx.trace_id), format_span_id(ctx.span_id))]
        assert span.attributes["etl.schedule_id"] == schedule_id
        # the run's values, the fire's interval among them (docs/tracing.md)
        assert span.attributes["etl.param.run_id"] == str(admission.run["id"])
        assert span.attributes["etl.param.interval_end"] == admission.run["params"]["interval_end"]
    assert first.run["trace_id"] != second.run["trace_id"]
