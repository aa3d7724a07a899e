"""Schedules: exactly one of every_minutes (5..1440) or daily_at (HH:MM UTC); next_fire_at
computed from the injected clock (NOW = 2026-11-29 13:00:00.123456 UTC); soft delete."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.domain.schedules import next_fire_at
from tests.integration.testapp import Api

BAD_BODIES = [
    ({"every_minutes": 4}, "every_minutes"),
    ({"every_minutes": 1441}, "every_minutes"),
    ({"every_minutes": 0}, "every_minutes"),
    ({"every_minutes": "60"}, "every_minutes"),
    ({"every_minutes": 60.5}, "every_minutes"),
    ({"every_minutes": True}, "every_minutes"),
    ({"every_minutes": None}, "every_minutes"),
    ({"every_minutes": "*/5 * * * *"}, "every_minutes"),
    ({"cron": "*/5 * * * *"}, "cron"),
    ({"daily_at": "*/5 * * * *"}, "daily_at"),
    ({"daily_at": "24:00"}, "daily_at"),
    ({"daily_at": "12:60"}, "daily_at"),
    ({"daily_at": "7:30"}, "daily_at"),
    ({"daily_at": "07:30:00"}, "daily_at"),
    ({"daily_at": 730}, "daily_at"),
    ({"every_minutes": 10, "daily_at": "07:30"}, "daily_at"),
    ({}, "every_minutes"),
    ({"daily_at": "07:30", "catchup": "some"}, "catchup"),
    ({"daily_at": "07:30", "catchup": True}, "catchup"),
]


def test_invalid_schedules_are_400_naming_the_field(api: Api) -> None:
    pid = api.create_pipeline()
    for body, field in BAD_BODIES:
        a = api.call("POST", f"/pipelines/{pid}/schedules", body)
        assert a.status == 400, body
        assert a.body["error"]["code"] == "validation_error"
        assert field in {d["field"] for d in a.body["error"]["details"]}, (body, a.body)
    assert api.sql("SELECT count(*) FROM schedules") == [(0,)]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"every_minutes": 5}, "2026-11-29T13:05:00.123456Z"),
        ({"every_minutes": 1440}, "2026-11-30T13:00:00.123456Z"),
        ({"daily_at": "13:30"}, "2026-11-29T13:30:00.000000Z"),
        ({"daily_at": "12:59"}, "2026-11-30T12:59:00.000000Z"),
        ({"daily_at": "13:00"}, "2026-11-30T13:00:00.000000Z"),  # 13:00:00.000 is before now
        ({"daily_at": "00:00"}, "2026-11-30T00:00:00.000000Z"),
    ],
)
def test_next_fire_at_from_the_injected_clock(api: Api, body: dict, expected: str) -> None:
    pid = api.create_pipeline()
    a = api.call("POST", f"/pipelines/{pid}/schedules", body)
    assert a.status == 201
    assert a.body["next_fire_at"] == expected
    assert a.body["anchor_at"] == "2026-11-29T13:00:00.123456Z"
    assert (a.body["pipeline_id"], a.body["last_fired_at"]) == (pid, None)
    assert a.body.get("every_minutes") == body.get("every_minutes")
    assert a.body.get("daily_at") == body.get("daily_at")


def test_next_fire_at_counts_from_the_anchor() -> None:
    anchor = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)
    later = anchor + timedelta(minutes=17)
    assert next_fire_at(every_minutes=5, daily_at=None, anchor_at=anchor, now=later) == (
        anchor + timedelta(minutes=20)
    )
    on_a_fire = anchor + timedelta(minutes=20)
    assert next_fire_at(every_minutes=5, daily_at=None, anchor_at=anchor, now=on_a_fire) == (
        anchor + timedelta(minutes=25)
    )
    late_evening = datetime(2026, 12, 31, 23, 59, 30, tzinfo=UTC)
    fire = next_fire_at(every_minutes=None, daily_at="23:59", anchor_at=anchor, now=late_evening)
    assert fire == datetime(2027, 1, 1, 23, 59, tzinfo=UTC)


def test_list_and_delete(api: Api) -> None:
    pid = api.create_pipeline()
    first = api.call("POST", f"/pipelines/{pid}/schedules", {"every_minutes": 60}).body
    body = {"daily_at": "06:15", "catchup": "all"}
    second = api.call("POST", f"/pipelines/{pid}/schedules", body).body
    assert (first["catchup"], second["catchup"]) == ("latest", "all")
    listed = api.call("GET", f"/pipelines/{pid}/schedules")
    assert listed.status == 200
    assert [s["id"] for s in listed.body["items"]] == [second["id"], first["id"]]
    assert [s["catchup"] for s in listed.body["items"]] == ["all", "latest"]
    assert set(listed.body["items"][0]) >= {
        "id",
        "pipeline_id",
        "every_minutes",
        "daily_at",
        "next_fire_at",
        "last_fired_at",
        "created_at",
    }
    gone = api.call("DELETE", f"/pipelines/{pid}/schedules/{first['id']}")
    assert (gone.status, gone.body) == (204, None)
    remaining = api.call("GET", f"/pipelines/{pid}/schedules").body["items"]
    assert [s["id"] for s in remaining] == [second["id"]]
    again = api.call("DELETE", f"/pipelines/{pid}/schedules/{first['id']}")
    assert (again.status, again.body["error"]["code"]) == (404, "not_found")
    other = api.create_pipeline()
    wrong_pipeline = api.call("DELETE", f"/pipelines/{other}/schedules/{second['id']}")
    assert wrong_pipeline.status == 404
    assert api.sql("SELECT count(*) FROM schedules WHERE deleted_at IS NOT NULL") == [(1,)]
