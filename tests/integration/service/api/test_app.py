"""The API app on a real database through falcon's TestClient: health, OpenAPI, request ids,
error shapes of falcon's own errors."""

from __future__ import annotations

from service.api.openapi.spec import openapi_path
from service.api.routes import ROUTES
from service.domain.db import Database
from service.domain.principals import ADMIN
from tests.integration.testapp import PLAN, Api

# --- tests -----------------------------------------------------------------------------------


def test_health_needs_no_token_and_checks_the_database(api: Api) -> None:
    a = api.call("GET", "/health", role=None)
    assert (a.status, a.body) == (200, {"status": "ok", "database": "ok"})


def test_health_is_503_without_a_database(app_factory) -> None:
    dead = app_factory(db=Database("postgresql://postgres@127.0.0.1:1/nowhere"))
    r = dead.client.simulate_get("/health")
    assert r.status_code == 503
    assert r.json["database"] == "unavailable"


def test_a_protected_call_without_a_database_is_503_in_the_error_shape(app_factory) -> None:
    dead = app_factory(db=Database("postgresql://postgres@127.0.0.1:1/nowhere"))
    r = dead.client.simulate_get("/api/v1/pipelines", headers={"Authorization": "Bearer x"})
    assert r.status_code == 503
    assert r.json["error"]["code"] == "database_unavailable"


def test_openapi_document_lists_every_route(api: Api) -> None:
    a = api.call("GET", "/openapi.json", role=None)
    assert a.status == 200
    assert a.body["openapi"].startswith("3.")
    paths, schemas = a.body["paths"], a.body["components"]["schemas"]
    # every route of the one table, every method it serves, and nothing else
    assert len(paths) == len(ROUTES)
    for route in ROUTES:
        path, _ = openapi_path(route.path)
        served = {m.removeprefix("on_") for m in dir(route.resource) if m.startswith("on_")}
        assert set(paths[path]) == set(route.operations) == served, path
        for method, op in paths[path].items():
            public = getattr(route.resource, "public", False)
            assert ("security" in op) != public, (path, method)
            assert ("401" in op["responses"]) != public, (path, method)
    assert {"/metrics", "/api/v1/pipelines/preview", "/api/v1/runs"} <= set(paths)
    assert {"Run", "Pipeline", "Schedule", "Error", "Preview", "PreviewRequest"} <= set(schemas)
    steps = schemas["Step"]["properties"]
    assert {"attempts", "columns", "checkpoint", "input_digest"} <= set(steps)


def test_openapi_lists_are_pages_of_summaries_with_their_parameters(api: Api) -> None:
    paths = api.call("GET", "/openapi.json", role=None).body["paths"]
    lists = {
        "/api/v1/pipelines": ("PipelineSummary", {"name"}),
        "/api/v1/pipelines/{pipeline_id}/revisions": ("RevisionSummary", set()),
        "/api/v1/pipelines/{pipeline_id}/runs": ("RunSummary", {"status"}),
        "/api/v1/pipelines/{pipeline_id}/schedules": ("Schedule", set()),
        "/api/v1/runs": ("RunSummary", {"status", "pipeline_id"}),
        "/api/v1/audit": ("Audit", {"entity_id", "entity_type", "action", "principal"}),
    }
    for path, (item, filters) in lists.items():
        op = paths[path]["get"]
        body = op["responses"]["200"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{item}Page"}, path
        query = {p["name"]: p["schema"] for p in op["parameters"] if p["in"] == "query"}
        assert set(query) == filters | {"limit", "before"}, path
        assert (query["limit"]["minimum"], query["limit"]["maximum"]) == (1, 500)
        assert "400" in op["responses"], path
    schemas = api.call("GET", "/openapi.json", role=None).body["components"]["schemas"]
    page = schemas["RunSummaryPage"]
    assert page["required"] == ["items", "next"]
    assert page["properties"]["items"]["items"] == {"$ref": "#/components/schemas/RunSummary"}
    assert "plan" not in schemas["PipelineSummary"]["properties"]


def test_openapi_preview_and_metrics(api: Api) -> None:
    doc = api.call("GET", "/openapi.json", role=None).body
    preview = doc["paths"]["/api/v1/pipelines/preview"]["post"]
    assert set(preview["responses"]) == {
        "200",
        "400",
        "401",
        "403",
        "404",
        "411",
        "413",
        "415",
        "503",
    }
    request = doc["components"]["schemas"]["PreviewRequest"]["oneOf"]
    assert [branch["required"] for branch in request] == [["plan"], ["pipeline_id"]]
    metrics = doc["paths"]["/metrics"]["get"]
    assert "security" not in metrics and set(metrics["responses"]) == {"200"}
    (media,) = metrics["responses"]["200"]["content"]
    assert media.startswith("text/plain; version=0.0.4")
    scraped = api.client.simulate_get("/metrics")
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith(media)


def test_every_answer_has_a_request_id_generated_or_echoed(api: Api) -> None:
    generated = api.call("GET", "/pipelines")
    assert len(generated.headers["x-request-id"]) == 32
    echoed = api.call("GET", "/pipelines", headers={"X-Request-Id": "abc-123"})
    assert echoed.headers["x-request-id"] == "abc-123"
    error = api.call("GET", "/nothing-here", headers={"X-Request-Id": "r-404"})
    assert (error.status, error.headers["x-request-id"]) == (404, "r-404")
    unauthorized = api.call("GET", "/pipelines", role=None)
    assert unauthorized.status == 401 and unauthorized.headers["x-request-id"]


def test_falcon_errors_use_our_error_shape(api: Api) -> None:
    unknown = api.call("GET", "/no/such/route")
    assert unknown.status == 404
    assert unknown.body["error"]["code"] == "not_found"
    assert unknown.body["error"]["details"] == []
    pid = api.create_pipeline()
    wrong_method = api.call("PUT", f"/pipelines/{pid}", {"plan": PLAN})
    assert wrong_method.status == 405
    assert wrong_method.body["error"]["code"] == "method_not_allowed"
    assert "PATCH" in wrong_method.headers["allow"]


def test_pipeline_create_get_list_and_revision_one(api: Api) -> None:
    a = api.call("POST", "/pipelines", {"name": "people", "plan": PLAN})
    assert a.status == 201
    assert a.body["revision"] == 1 and a.body["name"] == "people"
    assert a.body["plan"]["steps"][0]["name"] == "read"
    assert a.body["created_at"].endswith("Z")
    pid = a.body["id"]
    got = api.call("GET", f"/pipelines/{pid}")
    assert got.status == 200 and got.body == a.body
    assert got.headers["etag"] == '"1"'
    listed = api.call("GET", "/pipelines")
    assert [p["id"] for p in listed.body["items"]] == [pid]
    assert "plan" not in listed.body["items"][0] and listed.body["next"] is None
    rev = api.call("GET", f"/pipelines/{pid}/revisions/1")
    assert rev.status == 200
    assert (rev.body["revision"], rev.body["created_by"]) == (1, ADMIN)
    assert rev.body["plan"] == a.body["plan"]
