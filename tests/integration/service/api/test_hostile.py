"""Hostile request bodies get a 4xx in our error shape, never a 500: deep nesting, NUL and
lone surrogate escapes anywhere (names, trigger keys, plan strings, object keys), and
nothing of them reaches the database."""

from __future__ import annotations

import json

import pytest

from service.schemas.requests import MAX_JSON_DEPTH
from tests.integration.testapp import Api, plan_copy

JSON = {"Content-Type": "application/json"}


def _fields(body: dict) -> dict[str, str]:
    return {d["field"]: d["message"] for d in body["error"]["details"]}


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 900, 100_000])
def test_deep_nesting_is_400_with_a_clear_message(api: Api, depth: int) -> None:
    # Regression: depth 100,000 gave 500 (RecursionError in json.loads).
    nested = "[" * depth + "]" * depth
    for raw in (nested, f'{{"name": "x", "plan": {nested}}}'):
        a = api.call("POST", "/pipelines", raw=raw.encode(), headers=JSON)
        assert a.status == 400, a.body
        assert a.body["error"]["code"] == "malformed_json"
        assert f"deeper than {MAX_JSON_DEPTH} levels" in a.body["error"]["message"]
    assert api.sql("SELECT count(*) FROM pipelines") == [(0,)]


def test_deep_nesting_with_a_nul_is_400_not_a_recursion_error(api: Api) -> None:
    # Regression: depth 900 with "\u0000" got through json.loads and blew up in _has_nul.
    raw = '{"name": "x", "plan": ' + "[" * 900 + '"\\u0000"' + "]" * 900 + "}"
    a = api.call("POST", "/pipelines", raw=raw.encode(), headers=JSON)
    assert (a.status, a.body["error"]["code"]) == (400, "malformed_json")


def test_nesting_at_the_limit_is_still_judged_as_a_plan(api: Api) -> None:
    nested = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
    a = api.call(
        "POST", "/pipelines", raw=f'{{"name": "x", "plan": {nested}}}'.encode(), headers=JSON
    )
    assert (a.status, a.body["error"]["code"]) == (400, "invalid_plan")
    # Brackets inside strings are text, not nesting.
    plan = plan_copy()
    plan["steps"][1]["config"]["columns"] = ["[" * 100 + "{" * 100]
    assert api.call("POST", "/pipelines", {"name": "brackets", "plan": plan}).status == 201


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"name": "a\\ud800b", "plan": PLAN}', "name"),
        ('{"name": "ok", "plan": PLAN, "\\udfff": 1}', "\\udfff"),
        ('{"name": "ok", "plan": {"steps": [{"name": "\\ud800"}]}}', "plan.steps[0].name"),
        ('{"name": "ok", "plan": {"steps": [{"\\udbff": 1}]}}', "plan.steps[0].\\udbff"),
        ('{"name": "ok", "plan": {"steps": [], "x": ["\\u0000"]}}', "plan.x[0]"),
    ],
)
def test_lone_surrogates_and_nul_are_400_naming_the_field(api: Api, raw: str, field: str) -> None:
    # Regression: a lone surrogate gave 500 from psycopg2 (name) or jsonb (plan strings).
    raw = raw.replace("PLAN", json.dumps(plan_copy()))
    a = api.call("POST", "/pipelines", raw=raw.encode(), headers=JSON)
    assert (a.status, a.body["error"]["code"]) == (400, "validation_error"), a.body
    assert field in _fields(a.body)
    assert api.sql("SELECT count(*) FROM pipelines") == [(0,)]


def test_surrogates_in_a_patch_trigger_key_and_schedule_are_400(api: Api) -> None:
    pid = api.create_pipeline()
    plan = json.dumps(plan_copy()).replace("people.jsonl", "\\ud800.jsonl")
    a = api.call("PATCH", f"/pipelines/{pid}", raw=f'{{"plan": {plan}}}'.encode(), headers=JSON)
    assert a.status == 400 and "plan.steps[2].config.path" in _fields(a.body)
    a = api.call("POST", f"/pipelines/{pid}/runs", raw=b'{"trigger_key": "k\\udc00"}', headers=JSON)
    assert a.status == 400 and "trigger_key" in _fields(a.body)
    a = api.call(
        "POST", f"/pipelines/{pid}/schedules", raw=b'{"daily_at": "\\ud800"}', headers=JSON
    )
    assert a.status == 400 and "daily_at" in _fields(a.body)
    assert api.sql("SELECT count(*) FROM runs") == [(0,)]
    # A proper surrogate pair is a real character and welcome.
    a = api.call(
        "POST", f"/pipelines/{pid}/runs", raw=b'{"trigger_key": "\\ud83d\\ude00"}', headers=JSON
    )
    assert a.status == 201 and a.body["trigger_key"] == "\U0001f600"


def test_query_parameters_with_nul_or_lone_surrogates_are_400(api: Api) -> None:
    # Found by schemathesis: `?entity_id=%00` gave 500 (psycopg2 refuses NUL in a literal).
    for query in ("entity_id=a%00b", "x%00=1", "limit=5&entity_id=%00"):
        r = api.client.simulate_get(
            "/api/v1/audit",
            query_string=query,
            headers={"Authorization": "Bearer admin-token-0123456789"},
        )
        assert r.status_code == 400, (query, r.text)
        assert r.json["error"]["code"] == "validation_error"


def test_integral_json_numbers_are_integers(api: Api) -> None:
    # Found by schemathesis: JSON (and JSON schema) call 60.0 an integer; we answered 400.
    pid = api.create_pipeline()
    a = api.call("POST", f"/pipelines/{pid}/schedules", raw=b'{"every_minutes": 6e1}', headers=JSON)
    assert (a.status, a.body["every_minutes"]) == (201, 60)
    a = api.call(
        "POST", f"/pipelines/{pid}/schedules", raw=b'{"every_minutes": 60.5}', headers=JSON
    )
    assert a.status == 400 and "every_minutes" in _fields(a.body)
    a = api.call(
        "POST", f"/pipelines/{pid}/schedules", raw=b'{"every_minutes": 1e999999999}', headers=JSON
    )
    assert a.status == 400
