"""Run parameters through the API: declared at save time, typed at trigger time, stored on
the run (immutable), substituted into the run's plan, and a trigger key's repeat held to its
values."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.testapp import Api, plan_copy


def daily_plan() -> dict[str, Any]:
    """The sample plan reading `daily/{day}.csv` for a `date` parameter `day`, writing
    `out/{day:%Y%m%d}-{region}.jsonl`."""
    plan = plan_copy()
    plan["params"] = {"day": {"type": "date"}, "region": {"type": "string", "default": "north"}}
    plan["steps"][0]["config"]["path"] = "daily/{day}.csv"
    plan["steps"][-1]["config"]["path"] = "out/{day:%Y%m%d}-{region}.jsonl"
    return plan


def trigger(api: Api, pid: str, params: dict | None, key: str | None = None) -> Any:
    body: dict[str, Any] = {} if params is None else {"params": params}
    if key:
        body["trigger_key"] = key
    return api.call("POST", f"/pipelines/{pid}/runs", body)


def test_a_run_carries_every_resolved_value_and_its_substituted_plan(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    a = trigger(api, pid, {"day": "2026-12-01"})
    assert a.status == 201, a.body
    run = a.body
    assert run["params"] == {"day": "2026-12-01", "region": "north", "run_id": run["id"]}
    assert api.call("GET", f"/runs/{run['id']}").body["params"] == run["params"]
    ((plan,),) = api.sql("SELECT plan FROM runs WHERE id = %s", (run["id"],))
    assert plan["steps"][0]["config"]["path"] == "daily/2026-12-01.csv"
    assert plan["steps"][-1]["config"]["path"] == "out/20261201-north.jsonl"


def test_a_plan_without_placeholders_keeps_the_revision_plan(api: Api) -> None:
    run = trigger(api, api.create_pipeline(), None).body
    assert run["params"] == {"run_id": run["id"]}
    assert api.sql("SELECT plan FROM runs WHERE id = %s", (run["id"],)) == [(None,)]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "params.day"),
        ({"day": "2026-02-30"}, "params.day"),
        ({"day": 20261201}, "params.day"),
        ({"day": "2026-12-01", "colour": "red"}, "params.colour"),
        ({"day": "2026-12-01", "region": "../../etc"}, "params.region"),
        ({"day": "2026-12-01", "region": 5}, "params.region"),
    ],
)
def test_values_that_do_not_fit_answer_400_naming_the_parameter(
    api: Api, params: dict, field: str
) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    a = trigger(api, pid, params)
    assert a.status == 400, a.body
    assert a.body["error"]["code"] == "invalid_params"
    assert [d["field"] for d in a.body["error"]["details"]] == [field]
    assert field in a.body["error"]["message"]
    assert api.sql("SELECT count(*) FROM runs") == [(0,)]


def test_save_time_names_the_field_of_an_undeclared_placeholder_or_a_bad_default(
    api: Api,
) -> None:
    plan = daily_plan()
    plan["params"] = {"region": {"type": "string", "default": 3}}
    a = api.call("POST", "/pipelines", {"name": "p", "plan": plan})
    assert a.status == 400
    fields = {d["field"] for d in a.body["error"]["details"]}
    assert fields == {
        "plan.params.region.default",
        "plan.steps[0].config.path",
        "plan.steps[2].config.path",
    }


def test_a_trigger_key_reused_with_other_values_is_409(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    first = trigger(api, pid, {"day": "2026-12-01"}, key="k")
    again = trigger(api, pid, {"day": "2026-12-01", "region": "north"}, key="k")
    assert (first.status, again.status) == (201, 200)
    assert again.body["id"] == first.body["id"]
    other = trigger(api, pid, {"day": "2026-12-02"}, key="k")
    assert other.status == 409
    assert other.body["error"]["code"] == "params_mismatch"
    assert other.body["error"]["details"][0]["field"] == "params.day"
    assert api.sql("SELECT count(*) FROM runs") == [(1,)]


def test_a_runs_params_are_immutable(api: Api) -> None:
    run = trigger(api, api.create_pipeline(plan=daily_plan()), {"day": "2026-12-01"}).body
    with pytest.raises(Exception, match="immutable"):
        api.sql("UPDATE runs SET params = '{}' WHERE id = %s", (run["id"],))


def test_the_run_end_webhook_carries_the_values(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    hook = {"url": "http://127.0.0.1:9/hook", "events": ["run.succeeded"]}
    assert api.call("POST", f"/pipelines/{pid}/webhooks", hook).status == 201
    run = trigger(api, pid, {"day": "2026-12-01"}).body
    api.sql("UPDATE runs SET status = 'succeeded', started_at = now(), finished_at = now()"
            " WHERE id = %s", (run["id"],))  # fmt: skip
    ((sent,),) = api.sql("SELECT run FROM webhook_deliveries WHERE run_id = %s", (run["id"],))
    assert sent["params"] == run["params"] and sent["status"] == "succeeded"


def test_a_resume_keeps_the_values_and_the_substituted_plan(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    run = trigger(api, pid, {"day": "2026-12-01"}).body
    api.sql("UPDATE runs SET status = 'failed', started_at = now(), finished_at = now()"
            " WHERE id = %s", (run["id"],))  # fmt: skip
    fixed = daily_plan()
    fixed["steps"][0]["config"]["path"] = "fixed/{day}.csv"
    assert api.call("PATCH", f"/pipelines/{pid}", {"plan": fixed}).status == 200
    resumed = api.call("POST", f"/runs/{run['id']}/resume")
    assert resumed.status == 202, resumed.body
    assert resumed.body["params"] == run["params"] and resumed.body["revision"] == 1
    ((plan,),) = api.sql("SELECT plan FROM runs WHERE id = %s", (run["id"],))
    assert plan["steps"][0]["config"]["path"] == "daily/2026-12-01.csv"
