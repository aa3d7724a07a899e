"""Backfills through the API and the coordinator's backfiller: values admitted in ascending
order as the pipeline has room, never skipped, none lost or admitted twice across backfiller
restarts; the schedule's and manual triggers' slots kept; cancel; and rerun."""

from __future__ import annotations

from typing import Any

import psycopg2
import pytest

from service.backfiller import Backfiller
from tests.integration.service.api.test_metrics import parse, value
from tests.integration.service.api.test_run_params import daily_plan
from tests.integration.testapp import Api


def backfiller(api: Api) -> Backfiller:
    """A backfiller on the test database whose wake-ups join the API's."""
    return Backfiller(lambda: psycopg2.connect(api.db_url), lambda r, t: api.wakes.append((r, t)))


def create(api: Api, pid: str, first: Any, last: Any, param: str = "day") -> Any:
    return api.call(
        "POST", f"/pipelines/{pid}/backfills", {"param": param, "from": first, "to": last}
    )


def finish(api: Api, run_id: str, status: str = "succeeded") -> None:
    """End a run as the engine would (the advancer's final update)."""
    api.sql(
        "UPDATE runs SET status = %s, started_at = now(), finished_at = now() WHERE id = %s",
        (status, run_id),
    )


def test_values_are_admitted_in_order_as_the_pipeline_has_room(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    a = create(api, pid, "2013-01-30", "2013-02-02")
    assert a.status == 201, a.body
    b = a.body
    assert (b["status"], b["total"], b["pending"], b["succeeded"], b["failed"]) == (
        "running", 4, 2, 0, 0
    )  # fmt: skip
    assert [(r["value"], r["status"]) for r in b["runs"]] == [
        ("2013-01-30", "queued"),
        ("2013-01-31", "queued"),
        ("2013-02-01", "pending"),
        ("2013-02-02", "pending"),
    ]
    first = api.call("GET", f"/runs/{b['runs'][0]['run_id']}").body
    assert first["trigger_key"] == f"backfill:{b['id']}:2013-01-30"
    assert first["params"]["day"] == "2013-01-30"
    assert len(api.wakes) == 2

    filler = backfiller(api)
    assert filler.admit_once() == 0  # no room: 2 of the pipeline's slots are the backfill's
    finish(api, b["runs"][0]["run_id"])
    assert filler.admit_once() == 1
    finish(api, b["runs"][1]["run_id"], "failed")
    assert backfiller(api).admit_once() == 1  # a new backfiller (a restart) goes on
    view = api.call("GET", f"/backfills/{b['id']}").body
    assert [r["status"] for r in view["runs"]] == ["succeeded", "failed", "queued", "queued"]
    for r in view["runs"][2:]:
        finish(api, r["run_id"])
    assert filler.admit_once() == 0
    view = api.call("GET", f"/backfills/{b['id']}").body
    assert (view["status"], view["succeeded"], view["failed"], view["pending"]) == (
        "failed", 3, 1, 0
    )  # fmt: skip
    keys = api.sql("SELECT trigger_key FROM runs ORDER BY queue_seq")
    assert [k for (k,) in keys] == [f"backfill:{b['id']}:2013-0{d}" for d in
                                    ("1-30", "1-31", "2-01", "2-02")]  # fmt: skip


def test_a_backfill_leaves_the_other_slots_to_triggers_and_is_never_skipped(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    b = create(api, pid, "2013-01-01", "2013-01-05").body
    manual = [trigger(api, pid) for _ in range(3)]
    assert [m.status for m in manual] == [201, 201, 429]  # 2 backfill + 2 manual: full
    finish(api, b["runs"][0]["run_id"])
    finish(api, manual[0].body["id"])
    assert backfiller(api).admit_once() == 1  # one backfill slot free, one manual slot left
    assert trigger(api, pid).status == 201
    assert api.sql("SELECT count(*) FROM runs WHERE trigger_key LIKE 'backfill:%%' "
                   "AND status = 'skipped'") == [(0,)]  # fmt: skip


def trigger(api: Api, pid: str) -> Any:
    return api.call("POST", f"/pipelines/{pid}/runs", {"params": {"day": "2026-01-01"}})


def test_an_int_range_steps_one(api: Api) -> None:
    plan = daily_plan()
    plan["params"]["n"] = {"type": "int", "default": 0}
    pid = api.create_pipeline(plan=plan)
    plan["params"]["day"]["default"] = "2026-01-01"
    api.call("PATCH", f"/pipelines/{pid}", {"plan": plan})
    b = create(api, pid, 7, 9, param="n").body
    assert [r["value"] for r in b["runs"]] == [7, 8, 9]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"param": "region", "from": "a", "to": "b"}, "param"),
        ({"param": "nope", "from": "2013-01-01", "to": "2013-01-02"}, "param"),
        ({"param": "day", "from": "2013-01-02", "to": "2013-01-01"}, "to"),
        ({"param": "day", "from": "2013-02-30", "to": "2013-03-01"}, "from"),
        ({"param": "day", "from": "2000-01-01", "to": "2013-03-01"}, "to"),
        ({"param": "day", "to": "2013-03-01"}, "from"),
    ],
)
def test_a_bad_backfill_answers_400_naming_its_field(api: Api, body: dict, field: str) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    a = api.call("POST", f"/pipelines/{pid}/backfills", body)
    assert a.status == 400, a.body
    assert [d["field"] for d in a.body["error"]["details"]] == [field]
    assert api.sql("SELECT count(*) FROM backfills") == [(0,)]


def test_cancel_drops_the_pending_values_and_cancels_the_runs(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    b = create(api, pid, "2013-01-01", "2013-01-04").body
    api.sql("UPDATE runs SET status = 'running', started_at = now() WHERE id = %s",
            (b["runs"][0]["run_id"],))  # fmt: skip
    a = api.call("POST", f"/backfills/{b['id']}/cancel")
    assert a.status == 202, a.body
    assert (a.body["status"], a.body["pending"]) == ("canceled", 0)
    assert [r["status"] for r in a.body["runs"]] == ["running", "canceled", "canceled", "canceled"]
    assert api.sql("SELECT cancel_requested FROM runs WHERE id = %s",
                   (b["runs"][0]["run_id"],)) == [(True,)]  # fmt: skip
    assert backfiller(api).admit_once() == 0
    assert api.call("POST", f"/backfills/{b['id']}/cancel").status == 409
    assert api.call("GET", "/backfills/00000000-0000-0000-0000-000000000000").status == 404


def test_rerun_makes_a_run_of_the_current_revision_with_the_same_values(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    first = api.call("POST", f"/pipelines/{pid}/runs", {"params": {"day": "2026-12-01"}}).body
    finish(api, first["id"], "failed")
    fixed = daily_plan()
    fixed["steps"][0]["config"]["path"] = "fixed/{day}.csv"
    assert api.call("PATCH", f"/pipelines/{pid}", {"plan": fixed}).status == 200
    a = api.call("POST", f"/runs/{first['id']}/rerun")
    assert a.status == 201, a.body
    run = a.body
    assert run["id"] != first["id"] and run["revision"] == 2
    assert run["params"] == {**first["params"], "run_id": run["id"]}
    ((plan,),) = api.sql("SELECT plan FROM runs WHERE id = %s", (run["id"],))
    assert plan["steps"][0]["config"]["path"] == "fixed/2026-12-01.csv"
    assert api.call("POST", "/runs/00000000-0000-0000-0000-000000000000/rerun").status == 404


def test_two_backfills_of_one_pipeline_share_its_backfill_slots(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    api.call("POST", f"/pipelines/{pid}/pause")
    first = create(api, pid, "2013-01-01", "2013-01-03").body
    second = create(api, pid, "2014-01-01", "2014-01-03").body
    assert (first["pending"], second["pending"]) == (3, 3)  # paused: everything waits
    api.call("POST", f"/pipelines/{pid}/unpause")
    assert backfiller(api).admit_once() == 2
    views = [api.call("GET", f"/backfills/{b['id']}").body for b in (first, second)]
    assert [v["pending"] for v in views] == [1, 3]  # the older backfill first


def test_a_rerun_whose_values_the_current_plan_no_longer_declares_answers_409(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    first = api.call("POST", f"/pipelines/{pid}/runs", {"params": {"day": "2026-12-01"}}).body
    finish(api, first["id"], "failed")
    fewer = daily_plan()
    del fewer["params"]["region"]
    fewer["steps"][-1]["config"]["path"] = "out/{day}.jsonl"
    assert api.call("PATCH", f"/pipelines/{pid}", {"plan": fewer}).status == 200
    a = api.call("POST", f"/runs/{first['id']}/rerun")
    assert a.status == 409, a.body
    assert a.body["error"]["code"] == "params_conflict"
    assert [d["field"] for d in a.body["error"]["details"]] == ["params.region"]
    assert api.sql("SELECT count(*) FROM runs") == [(1,)]


def test_metrics_show_what_is_left_of_live_backfills_and_the_audit_log_holds_them(
    api: Api,
) -> None:
    pid = api.create_pipeline("daily", plan=daily_plan())
    b = create(api, pid, "2013-01-01", "2013-01-04").body
    api.sql("UPDATE runs SET status = 'running', started_at = now() WHERE id = %s",
            (b["runs"][0]["run_id"],))  # fmt: skip

    def gauges() -> dict[str, float]:
        m = parse(api.client.simulate_get("/metrics").text)
        states = {s: value(m, "etl_backfill_runs", pipeline="daily", state=s)
                  for s in ("pending", "queued", "running")}  # fmt: skip
        return {**states, "backfills": value(m, "etl_backfills_running", pipeline="daily")}

    assert gauges() == {"pending": 2, "queued": 1, "running": 1, "backfills": 1}
    assert api.call("POST", f"/backfills/{b['id']}/cancel").status == 202
    assert gauges() == {"pending": 0, "queued": 0, "running": 1, "backfills": 1}
    finish(api, b["runs"][0]["run_id"], "canceled")
    assert gauges() == {"pending": 0, "queued": 0, "running": 0, "backfills": 0}
    audit = api.sql("SELECT action, principal FROM audit WHERE entity_id = %s ORDER BY id",
                    (b["id"],))  # fmt: skip
    assert [a for a, _ in audit] == ["backfill.create", "backfill.cancel"]
    triggers = api.sql("SELECT count(*) FROM audit WHERE action = 'run.trigger' "
                       "AND principal = 'backfill'")  # fmt: skip
    assert triggers == [(2,)]


def test_a_backfill_of_a_schedules_intervals_runs_each_fire_of_the_range(api: Api) -> None:
    plan = daily_plan()
    plan["params"]["day"]["default"] = "2026-01-01"
    plan["steps"][0]["config"]["path"] = "daily/{logical_date}.csv"
    pid = api.create_pipeline(plan=plan)
    sid = api.call("POST", f"/pipelines/{pid}/schedules", {"daily_at": "06:30"}).body["id"]
    body = {"schedule_id": sid, "from": "2013-01-01T00:00:00Z", "to": "2013-01-04T06:30:00Z"}
    a = api.call("POST", f"/pipelines/{pid}/backfills", body)
    assert a.status == 201, a.body
    b = a.body
    assert (b["param"], b["schedule_id"], b["total"]) == ("interval_end", sid, 4)
    assert [r["value"] for r in b["runs"]] == [f"2013-01-0{d}T06:30:00Z" for d in (1, 2, 3, 4)]
    ((params, path),) = api.sql("SELECT params, plan -> 'steps' -> 0 -> 'config' ->> 'path' "
                                "FROM runs WHERE id = %s", (b["runs"][0]["run_id"],))  # fmt: skip
    assert (params["logical_date"], params["interval_start"], params["interval_end"]) == (
        "2012-12-31", "2012-12-31T06:30:00Z", "2013-01-01T06:30:00Z"
    )  # fmt: skip
    assert path == "daily/2012-12-31.csv"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"schedule_id": "00000000-0000-0000-0000-000000000000"}, "schedule_id"),
        ({"from": "2013-01-01"}, "from"),
        ({"to": "2012-01-01T00:00:00Z"}, "to"),
        ({"param": "day"}, "schedule_id"),
        ({"schedule_id": None, "param": None}, "param"),
    ],
)
def test_a_bad_backfill_of_a_schedule_answers_400_naming_its_field(
    api: Api, body: dict, field: str
) -> None:
    plan = daily_plan()
    pid = api.create_pipeline(plan=plan)
    sid = api.call("POST", f"/pipelines/{pid}/schedules", {"daily_at": "06:30"}).body["id"]
    full = {"schedule_id": sid, "from": "2013-01-01T00:00:00Z", "to": "2013-01-04T06:30:00Z"}
    full.update(body)
    full = {k: v for k, v in full.items() if v is not None}
    a = api.call("POST", f"/pipelines/{pid}/backfills", full)
    assert a.status == 400, a.body
    assert [d["field"] for d in a.body["error"]["details"]] == [field]


def test_a_schedules_backfill_of_a_plan_needing_a_value_names_it(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())  # `day` has no default: a fire gives none
    sid = api.call("POST", f"/pipelines/{pid}/schedules", {"daily_at": "06:30"}).body["id"]
    body = {"schedule_id": sid, "from": "2013-01-01T00:00:00Z", "to": "2013-01-02T06:30:00Z"}
    a = api.call("POST", f"/pipelines/{pid}/backfills", body)
    assert a.status == 400, a.body
    assert [d["field"] for d in a.body["error"]["details"]] == ["params.day"]
