"""A scheduled run's interval built-ins (docs/schedules.md): the fire at the end of an
interval processes it, `logical_date` is the interval's start date. Fired with an injected
clock, never by waiting."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg2
import psycopg2.extensions
import pytest

from service.domain.schedules import ScheduleSpec
from tests.integration.service.test_scheduler import (
    Clock,
    Wakes,
    make_pipeline,
    make_schedule,
    make_scheduler,
    skip_reason,
    sql,
)

# Reads the file of the interval's day, writes one file per interval.
PLAN = {
    "steps": [
        {
            "name": "read",
            "type": "ingest",
            "config": {"source": "file", "path": "daily/{logical_date:%Y/%m/%d}.csv"},
        },
        {
            "name": "out",
            "type": "export",
            "depends_on": ["read"],
            "config": {"target": "file", "path": "out/{interval_start}.jsonl"},
        },
    ]
}


@pytest.fixture
def db(db_url: str) -> Iterator[psycopg2.extensions.connection]:
    c = psycopg2.connect(db_url, options="-c timezone=UTC")
    c.autocommit = True
    yield c
    c.close()


def templated_pipeline(db, plan: dict) -> str:
    pipeline_id = make_pipeline(db)
    sql(db, "UPDATE pipelines SET revision = 2 WHERE id = %s", pipeline_id)
    sql(db, "INSERT INTO revisions (pipeline_id, number, plan, created_by) "
        "VALUES (%s, 2, %s, 'test')", pipeline_id, json.dumps(plan))  # fmt: skip
    return pipeline_id


def run_of(db, run_id: str) -> tuple[dict, dict]:
    ((params, plan),) = sql(db, "SELECT params, plan FROM runs WHERE id = %s", run_id)
    return params, plan


def test_a_daily_fire_processes_the_day_before(db_url, db) -> None:
    pipeline_id = templated_pipeline(db, PLAN)
    anchor = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    schedule_id = make_schedule(db, pipeline_id, anchor_at=anchor, daily_at="00:00")
    fire_time = datetime(2026, 12, 2, 0, 0, tzinfo=UTC)
    scheduler = make_scheduler(db_url, Wakes(), now=Clock(fire_time + timedelta(seconds=1)))

    admission = scheduler.fire(schedule_id, fire_time)

    assert admission is not None and admission.outcome == "created"
    params, plan = run_of(db, admission.run["id"])
    assert params == {
        "logical_date": "2026-12-01",
        "interval_start": "2026-12-01T00:00:00Z",
        "interval_end": "2026-12-02T00:00:00Z",
        "run_id": str(admission.run["id"]),
    }
    assert plan["steps"][0]["config"]["path"] == "daily/2026/12/01.csv"
    assert plan["steps"][1]["config"]["path"] == "out/2026-12-01T00:00:00Z.jsonl"
    again = scheduler.fire(schedule_id, fire_time)  # a repeat asks for the same values
    assert again is not None and again.outcome == "existing"


def test_every_minutes_intervals_tile_time_from_the_anchor() -> None:
    anchor = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)
    spec = ScheduleSpec("s", "p", 15, None, anchor)
    first = spec.next_fire_after(anchor)
    second = spec.next_fire_after(first)
    assert spec.interval_params(first) == {
        "logical_date": "2026-11-29",
        "interval_start": "2026-11-29T13:00:00Z",
        "interval_end": "2026-11-29T13:15:00Z",
    }
    assert spec.interval_params(second)["interval_start"] == "2026-11-29T13:15:00Z"


def test_a_fire_of_a_plan_needing_a_value_is_recorded_without_a_run(db_url, db) -> None:
    plan = json.loads(json.dumps(PLAN))
    plan["params"] = {"region": {"type": "string"}}  # no default: a schedule cannot give it
    pipeline_id = templated_pipeline(db, plan)
    anchor = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)
    schedule_id = make_schedule(db, pipeline_id, anchor_at=anchor, every_minutes=5)
    fire_time = anchor + timedelta(minutes=5)
    scheduler = make_scheduler(db_url, Wakes(), now=Clock(fire_time))

    assert scheduler.fire(schedule_id, fire_time) is None
    assert skip_reason(db, schedule_id) == "plan_invalid"
    assert sql(db, "SELECT count(*) FROM runs WHERE pipeline_id = %s", pipeline_id) == [(0,)]
