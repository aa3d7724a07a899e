"""`"catchup": "all"` (docs/schedules.md): after downtime every missed interval of a
schedule runs, in order, through one backfill of its intervals, instead of one run for the
latest missed fire (the default, tests/integration/service/test_scheduler.py). Driven by
an injected clock, never by waiting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg2

from service.backfiller import Backfiller
from tests.integration.service.test_schedule_intervals import PLAN, db, templated_pipeline
from tests.integration.service.test_scheduler import (
    Clock,
    Wakes,
    make_schedule,
    make_scheduler,
    schedule_row,
    sql,
)

__all__ = ["db"]  # the fixture, imported for these tests

ANCHOR = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
# Down from before the 11-29 fire to just after the 12-04 one: six daily fires missed.
NOW = datetime(2026, 12, 4, 0, 0, 30, tzinfo=UTC)
MISSED = [f"2026-{d}T00:00:00Z" for d in ("11-29", "11-30", "12-01", "12-02", "12-03", "12-04")]


def daily_schedule(db, catchup: str, plan: dict = PLAN) -> tuple[str, str]:
    pipeline_id = templated_pipeline(db, plan)
    schedule_id = make_schedule(db, pipeline_id, anchor_at=ANCHOR, daily_at="00:00")
    sql(db, "UPDATE schedules SET catchup = %s WHERE id = %s", catchup, schedule_id)
    return pipeline_id, schedule_id


def runs_by_key(db, pipeline_id: str) -> list[tuple[str, dict]]:
    return sql(db, "SELECT trigger_key, params - 'run_id' FROM runs WHERE pipeline_id = %s "
               "ORDER BY queue_seq", pipeline_id)  # fmt: skip


def test_every_missed_interval_runs_in_order_through_one_backfill(db_url, db) -> None:
    pipeline_id, schedule_id = daily_schedule(db, "all")
    wakes = Wakes()
    make_scheduler(db_url, wakes, now=Clock(NOW)).reconcile()

    ((backfill_id, param, total, of_schedule, interval_s),) = sql(
        db, "SELECT id::text, param, total, schedule_id::text, interval_s FROM backfills"
    )
    assert (param, total, of_schedule, interval_s) == ("interval_end", 6, schedule_id, 86400)
    values = sql(db, "SELECT value FROM backfill_values WHERE backfill_id = %s "
                 "ORDER BY position", backfill_id)  # fmt: skip
    assert [v for (v,) in values] == MISSED
    runs = runs_by_key(db, pipeline_id)  # two admitted at once: the backfill's two slots
    assert [k for k, _ in runs] == [f"backfill:{backfill_id}:{m}" for m in MISSED[:2]]
    assert runs[0][1] == {
        "logical_date": "2026-11-28",
        "interval_start": "2026-11-28T00:00:00Z",
        "interval_end": "2026-11-29T00:00:00Z",
    }
    assert len(wakes.calls) == 2
    row = schedule_row(db, schedule_id)
    assert row["last_fired_at"] == datetime(2026, 12, 4, tzinfo=UTC)
    assert row["next_fire_at"] == datetime(2026, 12, 5, tzinfo=UTC)
    assert row["last_run_id"] is None

    # A restart (or a second coordinator) finds nothing missed; a late job fire of a time
    # the backfill holds makes no run of its own.
    again = make_scheduler(db_url, wakes, now=Clock(NOW + timedelta(seconds=5)))
    again.reconcile()
    assert again.fire(schedule_id, datetime(2026, 12, 2, tzinfo=UTC)) is None
    assert sql(db, "SELECT count(*) FROM backfills") == [(1,)]
    assert len(runs_by_key(db, pipeline_id)) == 2

    # The backfiller admits the rest in order as runs end: every interval exactly once.
    filler = Backfiller(lambda: psycopg2.connect(db_url), lambda r, t: None)
    for _ in range(3):
        sql(db, "UPDATE runs SET status = 'succeeded', started_at = now(), finished_at = now() "
            "WHERE pipeline_id = %s AND status = 'queued'", pipeline_id)  # fmt: skip
        filler.admit_once()
    runs = runs_by_key(db, pipeline_id)
    assert [p["interval_end"] for _, p in runs] == MISSED
    assert [p["logical_date"] for _, p in runs][-1] == "2026-12-03"


def test_latest_stays_the_default_and_one_missed_fire_is_an_ordinary_fire(db_url, db) -> None:
    pipeline_id, schedule_id = daily_schedule(db, "latest")
    make_scheduler(db_url, Wakes(), now=Clock(NOW)).reconcile()
    assert [k for k, _ in runs_by_key(db, pipeline_id)] == [
        f"schedule:{schedule_id}:2026-12-04T00:00:00Z"
    ]
    other, all_id = daily_schedule(db, "all")
    one_missed = datetime(2026, 11, 29, 0, 0, 30, tzinfo=UTC)
    make_scheduler(db_url, Wakes(), now=Clock(one_missed)).reconcile()
    assert [k for k, _ in runs_by_key(db, other)] == [f"schedule:{all_id}:2026-11-29T00:00:00Z"]
    assert sql(db, "SELECT count(*) FROM backfills") == [(0,)]


def test_a_paused_pipeline_records_its_catch_up_as_a_skipped_fire(db_url, db) -> None:
    pipeline_id, schedule_id = daily_schedule(db, "all")
    sql(db, "UPDATE pipelines SET paused = true WHERE id = %s", pipeline_id)
    make_scheduler(db_url, Wakes(), now=Clock(NOW)).reconcile()
    assert sql(db, "SELECT count(*) FROM backfills") == [(0,)]
    assert sql(db, "SELECT last_skip_reason FROM schedules WHERE id = %s", schedule_id) == [
        ("paused",)
    ]


def test_a_plan_needing_a_value_no_fire_gives_records_plan_invalid(db_url, db) -> None:
    plan = {**PLAN, "params": {"region": {"type": "string"}}}  # no default
    _, schedule_id = daily_schedule(db, "all", plan)
    make_scheduler(db_url, Wakes(), now=Clock(NOW)).reconcile()
    assert sql(db, "SELECT count(*) FROM backfills") == [(0,)]
    assert sql(db, "SELECT last_skip_reason FROM schedules WHERE id = %s", schedule_id) == [
        ("plan_invalid",)
    ]
