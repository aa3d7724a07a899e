"""Request validation: plan field paths reach the client, malformed JSON, wrong content type,
oversized bodies, unknown fields, unknown ids, If-Match, duplicate names."""

from __future__ import annotations

import json
import uuid

from tests.integration.testapp import Api, plan_copy


def _details(body: dict) -> dict[str, str]:
    return {d["field"]: d["message"] for d in body["error"]["details"]}


def test_every_plan_error_reaches_the_client_with_its_path(api: Api) -> None:
    plan = plan_copy()
    plan["on_failure"] = "explode"
    plan["steps"][0]["type"] = "bogus"
    plan["steps"][2]["depends_on"] = ["nowhere"]
    a = api.call("POST", "/pipelines", {"name": "broken", "plan": plan})
    assert a.status == 400
    assert a.body["error"]["code"] == "invalid_plan"
    fields = _details(a.body)
    assert {"plan.on_failure", "plan.steps[0].type", "plan.steps[2].depends_on[0]"} <= set(fields)
    assert "nowhere" in fields["plan.steps[2].depends_on[0]"]
    assert api.sql("SELECT count(*) FROM pipelines") == [(0,)]


def test_plan_that_is_not_an_object_and_a_cycle(api: Api) -> None:
    a = api.call("POST", "/pipelines", {"name": "x", "plan": [1, 2]})
    assert (a.status, list(_details(a.body))) == (400, ["plan"])
    plan = plan_copy()
    plan["steps"][0]["depends_on"] = ["to_file"]
    a = api.call("POST", "/pipelines", {"name": "x", "plan": plan})
    assert a.status == 400
    assert any("cycle" in m for m in _details(a.body).values())


def test_patch_validates_the_plan_too(api: Api) -> None:
    pid = api.create_pipeline()
    plan = plan_copy()
    plan["steps"] = []
    a = api.call("PATCH", f"/pipelines/{pid}", {"plan": plan})
    assert a.status == 400 and "plan.steps" in _details(a.body)
    assert api.call("GET", f"/pipelines/{pid}").body["revision"] == 1


def test_malformed_json_is_400(api: Api) -> None:
    headers = {"Content-Type": "application/json"}
    a = api.call("POST", "/pipelines", raw=b'{"name": "x", "plan": ', headers=headers)
    assert (a.status, a.body["error"]["code"]) == (400, "malformed_json")
    a = api.call("POST", "/pipelines", raw=b"\xff\xfe", headers=headers)
    assert (a.status, a.body["error"]["code"]) == (400, "malformed_json")
    a = api.call("POST", "/pipelines", raw=b'{"name": NaN}', headers=headers)
    assert (a.status, a.body["error"]["code"]) == (400, "malformed_json")


def test_body_that_is_not_an_object_is_400_on_body(api: Api) -> None:
    a = api.call("POST", "/pipelines", [1, 2])
    assert (a.status, a.body["error"]["code"]) == (400, "validation_error")
    assert "body" in _details(a.body)


def test_wrong_content_type_is_415(api: Api) -> None:
    body = json.dumps({"name": "x", "plan": plan_copy()}).encode()
    for ctype in ("text/plain", "application/x-www-form-urlencoded"):
        a = api.call("POST", "/pipelines", raw=body, headers={"Content-Type": ctype})
        assert (a.status, a.body["error"]["code"]) == (415, "unsupported_media_type")
    a = api.call("POST", "/pipelines", raw=body)
    assert a.status == 415
    ok = api.call(
        "POST", "/pipelines", raw=body, headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert ok.status == 201


def test_body_over_one_mib_is_413(api: Api) -> None:
    big = json.dumps({"name": "x", "plan": {"pad": "x" * (1024 * 1024)}}).encode()
    a = api.call("POST", "/pipelines", raw=big, headers={"Content-Type": "application/json"})
    assert (a.status, a.body["error"]["code"]) == (413, "payload_too_large")
    pid = api.create_pipeline()
    a = api.call("POST", f"/pipelines/{pid}/runs", raw=big, headers={"Content-Type": "text/plain"})
    assert a.status == 413
    assert api.sql("SELECT count(*) FROM runs") == [(0,)]


def test_unknown_fields_are_400_naming_the_field(api: Api) -> None:
    a = api.call("POST", "/pipelines", {"name": "x", "plan": plan_copy(), "owner": "me"})
    assert a.status == 400 and "owner" in _details(a.body)
    pid = api.create_pipeline()
    a = api.call("POST", f"/pipelines/{pid}/runs", {"trigger_key": "k", "priority": 1})
    assert a.status == 400 and "priority" in _details(a.body)
    a = api.call("PATCH", f"/pipelines/{pid}", {"plan": plan_copy(), "name": "renamed"})
    assert a.status == 400 and "name" in _details(a.body)
    run_id = api.trigger(pid).body["id"]
    a = api.call("POST", f"/runs/{run_id}/cancel", {"force": True})
    assert a.status == 400 and "force" in _details(a.body)


def test_missing_and_mistyped_fields(api: Api) -> None:
    a = api.call("POST", "/pipelines", {"plan": plan_copy()})
    assert a.status == 400 and "name" in _details(a.body)
    a = api.call("POST", "/pipelines", {"name": "", "plan": plan_copy()})
    assert a.status == 400 and "name" in _details(a.body)
    pid = api.create_pipeline()
    for key in ("", "k" * 201, 5, None):
        a = api.call("POST", f"/pipelines/{pid}/runs", {"trigger_key": key})
        assert a.status == 400 and "trigger_key" in _details(a.body), key
    assert api.trigger(pid, "k" * 200).status == 201
    a = api.call("GET", f"/pipelines/{pid}/runs?limit=0")
    assert a.status == 400 and "limit" in _details(a.body)


UNKNOWN = [
    ("GET", "/pipelines/{u}"),
    ("PATCH", "/pipelines/{u}"),
    ("GET", "/pipelines/{u}/revisions"),
    ("GET", "/pipelines/{p}/revisions/7"),
    ("GET", "/pipelines/{p}/revisions/x"),
    ("GET", "/pipelines/{u}/runs"),
    ("POST", "/pipelines/{u}/runs"),
    ("GET", "/runs/{u}"),
    ("POST", "/runs/{u}/cancel"),
    ("POST", "/runs/{u}/resume"),
    ("GET", "/pipelines/{u}/schedules"),
    ("POST", "/pipelines/{u}/schedules"),
    ("DELETE", "/pipelines/{p}/schedules/{u}"),
    ("GET", "/pipelines/not-a-uuid"),
    ("GET", "/runs/42"),
    ("POST", "/runs/not-a-uuid/cancel"),
]


def test_unknown_ids_are_404(api: Api) -> None:
    pid = api.create_pipeline()
    for method, path in UNKNOWN:
        body = {
            "PATCH": {"plan": plan_copy()},
            "POST": {"every_minutes": 10} if path.endswith("schedules") else {},
        }.get(method)
        a = api.call(method, path.format(u=uuid.uuid4(), p=pid), body)
        assert (a.status, a.body["error"]["code"]) == (404, "not_found"), (method, path)


def test_if_match_guards_patch(api: Api) -> None:
    pid = api.create_pipeline()
    stale = api.call("PATCH", f"/pipelines/{pid}", {"plan": plan_copy()}, headers={"If-Match": "2"})
    assert (stale.status, stale.body["error"]["code"]) == (412, "precondition_failed")
    assert api.call("GET", f"/pipelines/{pid}").body["revision"] == 1
    ok = api.call("PATCH", f"/pipelines/{pid}", {"plan": plan_copy()}, headers={"If-Match": '"1"'})
    assert (ok.status, ok.body["revision"], ok.headers["etag"]) == (200, 2, '"2"')
    again = api.call("PATCH", f"/pipelines/{pid}", {"plan": plan_copy()}, headers={"If-Match": "1"})
    assert again.status == 412


def test_duplicate_pipeline_name_is_409(api: Api) -> None:
    api.create_pipeline("people")
    a = api.call("POST", "/pipelines", {"name": "people", "plan": plan_copy()})
    assert (a.status, a.body["error"]["code"]) == (409, "duplicate_name")
    assert "name" in _details(a.body)
