"""The API app in process for the `test_api_*` modules: principals with known tokens, a
sample plan, a fixed clock, and `Api`, a falcon TestClient that speaks our JSON (the `api`
fixture of `conftest.py` builds it)."""

from __future__ import annotations

import copy
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import falcon.testing

from ddl import connect
from drills import ApiClient
from service.domain.principals import ADMIN, OPERATOR, VIEWER, hash_token

API_WORKERS = 3  # gunicorn workers of the `server` fixture
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
    sleeps: list[float] = field(default_factory=list)  # delays of failed authentications

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
        conn = connect(self.db_url, "etl-test")
        try:
            with conn, conn.cursor() as cur:
                cur.execute(query, params)
                return cur.fetchall() if cur.description else []
        finally:
            conn.close()


def seed_principals(db_url: str) -> None:
    """One principal per role with the tokens of `TOKENS`."""
    conn = connect(db_url, "etl-test")
    with conn, conn.cursor() as cur:
        for role, token in TOKENS.items():
            cur.execute(
                "INSERT INTO principals (id, name, role, token_hash) VALUES (%s, %s, %s, %s)",
                (str(uuid.uuid4()), role, role, hash_token(token)),
            )
    conn.close()


def request_json(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """`method` on `path` under `base` (`.../api/v1`, the `server` fixture) as the admin."""
    client = ApiClient(base.removesuffix("/api/v1"), TOKENS[ADMIN], timeout_s=30)
    return client.call(method, path, body)
