"""The API app on a real database through falcon's TestClient: health, OpenAPI, request ids,
error shapes of falcon's own errors. Also home of the `api` fixture and helpers the other
`test_api_*` modules import (`api_fixture`, registered as `api`, works where imported)."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import falcon.testing
import psycopg2
import pytest

from service.app import Deps, create_app
from service.auth import ADMIN, OPERATOR, VIEWER, hash_token
from service.db import Database

TOKENS = {ADMIN: "admin-token-0123456789", OPERATOR: "operator-token-0123", VIEWER: "viewer-tok"}
NOW = datetime(2026, 11, 29, 13, 0, 0, 123456, tzinfo=UTC)
PLAN: dict[str, Any] = {
    "on_failure": "stop_dependents",
    "on_row_error": "reject",
    "steps": [
        {
            "name": "read",
            "type": "ingest",
            "config": {
                "source": "file",
                "path": "people.csv",
                "format": "csv",
                "columns": {"id": "int", "amount": "int"},
            },
        },
        {
            "name": "clean",
            "type": "transform",
            "depends_on": ["read"],
            "config": {"op": "normalize_whitespace", "columns": ["name"]},
        },
        {
            "name": "to_file",
            "type": "export",
            "depends_on": ["clean"],
            "config": {"target": "file", "path": "people.jsonl", "format": "jsonl"},
        },
    ],
}


def plan_copy() -> dict[str, Any]:
    """A private copy of the sample plan."""
    return copy.deepcopy(PLAN)


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


@dataclass
class Api:
    """A TestClient on `create_app(deps)` plus what the deps recorded."""

    client: falcon.testing.TestClient
    db_url: str
    wakes: list[tuple[str, str]] = field(default_factory=list)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        role: str | None = ADMIN,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Answer:
        """`method` on `/api/v1{path}` (or `/health`) as `role` (None: no token)."""
        h = dict(headers or {})
        token = token or (TOKENS[role] if role else None)
        if token:
            h["Authorization"] = f"Bearer {token}"
        data = raw
        if data is None and body is not None:
            data = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        url = path if path.startswith("/health") else f"/api/v1{path}"
        r = self.client.simulate_request(method, url, body=data, headers=h)
        return Answer(r.status_code, r.json if r.content else None, dict(r.headers))

    def create_pipeline(self, name: str | None = None, plan: dict | None = None) -> str:
        name = name or f"p-{uuid.uuid4().hex[:8]}"
        a = self.call("POST", "/pipelines", {"name": name, "plan": plan or plan_copy()})
        assert a.status == 201, a.body
        return a.body["id"]

    def trigger(self, pipeline_id: str, key: str | None = None, role: str = ADMIN) -> Answer:
        return self.call(
            "POST", f"/pipelines/{pipeline_id}/runs", {"trigger_key": key} if key else {}, role=role
        )

    def sql(self, query: str, params: Any = None) -> list[tuple]:
        """Run SQL on the test database (setting up states the engine would produce)."""
        conn = psycopg2.connect(self.db_url)
        try:
            with conn, conn.cursor() as cur:
                cur.execute(query, params)
                return cur.fetchall() if cur.description else []
        finally:
            conn.close()


def seed_principals(db_url: str) -> None:
    """One principal per role with the tokens of `TOKENS`."""
    conn = psycopg2.connect(db_url)
    with conn, conn.cursor() as cur:
        for role, token in TOKENS.items():
            cur.execute(
                "INSERT INTO principals (id, name, role, token_hash) VALUES (%s, %s, %s, %s)",
                (str(uuid.uuid4()), role, role, hash_token(token)),
            )
    conn.close()


@pytest.fixture(name="api")
def api_fixture(db_url: str) -> Iterator[Api]:
    """The app on a fresh database with three principals, a fixed clock and a recording
    `wake_run`."""
    seed_principals(db_url)
    wakes: list[tuple[str, str]] = []
    db = Database(db_url)
    deps = Deps(
        db=db,
        wake_run=lambda run_id, trace_id: wakes.append((run_id, trace_id)),
        now=lambda: NOW,
        new_id=uuid.uuid4,
    )
    yield Api(falcon.testing.TestClient(create_app(deps)), db_url, wakes)
    db.close()


# --- tests -----------------------------------------------------------------------------------


def test_health_needs_no_token_and_checks_the_database(api: Api) -> None:
    a = api.call("GET", "/health", role=None)
    assert (a.status, a.body) == (200, {"status": "ok", "database": "ok"})


def test_health_is_503_without_a_database() -> None:
    dead = Database("postgresql://postgres@127.0.0.1:1/nowhere")
    app = create_app(Deps(db=dead, wake_run=lambda r, t: None))
    r = falcon.testing.TestClient(app).simulate_get("/health")
    assert r.status_code == 503
    assert r.json["database"] == "unavailable"


def test_a_protected_call_without_a_database_is_503_in_the_error_shape() -> None:
    dead = Database("postgresql://postgres@127.0.0.1:1/nowhere")
    app = create_app(Deps(db=dead, wake_run=lambda r, t: None))
    r = falcon.testing.TestClient(app).simulate_get(
        "/api/v1/pipelines", headers={"Authorization": "Bearer x"}
    )
    assert r.status_code == 503
    assert r.json["error"]["code"] == "database_unavailable"


def test_openapi_document_lists_every_route(api: Api) -> None:
    a = api.call("GET", "/openapi.json", role=None)
    assert a.status == 200
    assert a.body["openapi"].startswith("3.")
    paths = a.body["paths"]
    assert "/api/v1/pipelines/{pipeline_id}/runs" in paths
    assert set(paths["/api/v1/pipelines/{pipeline_id}/runs"]) == {"get", "post"}
    assert {"Run", "Pipeline", "Schedule", "Error"} <= set(a.body["components"]["schemas"])
    steps = a.body["components"]["schemas"]["Step"]["properties"]
    assert {"attempts", "columns", "checkpoint", "input_digest"} <= set(steps)


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
