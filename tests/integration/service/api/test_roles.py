"""The role matrix: every endpoint x {no token, bad token, viewer, operator, admin}.

No token or an unknown token -> 401 with `WWW-Authenticate: Bearer`; a role that may not make
the call -> 403; an allowed role gets the endpoint's success status. Each call gets a fresh
target (`prepare`) so one role's success does not change the next role's answer."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from service.domain.principals import ADMIN, OPERATOR, VIEWER
from tests.integration.service.api.test_run_params import daily_plan
from tests.integration.testapp import PLAN, Api

ANYONE = {ADMIN, OPERATOR, VIEWER}
OPERATE = {ADMIN, OPERATOR}
ADMIN_ONLY = {ADMIN}

Prepare = Callable[[Api], tuple[str, Any]]


def _pipeline(api: Api) -> str:
    return api.create_pipeline()


def _queued_run(api: Api) -> str:
    return api.trigger(_pipeline(api)).body["id"]


def _failed_run(api: Api) -> str:
    run_id = _queued_run(api)
    api.sql("UPDATE runs SET status = 'failed', finished_at = now() WHERE id = %s", (run_id,))
    return run_id


def _schedule(api: Api) -> tuple[str, str]:
    pid = _pipeline(api)
    a = api.call("POST", f"/pipelines/{pid}/schedules", {"every_minutes": 30})
    return pid, a.body["id"]


def _cursor_pipeline(api: Api) -> str:
    config = {"source": "table", "table": "src", "cursor": "ts"}
    return api.create_pipeline(
        plan={"steps": [{"name": "read", "type": "ingest", "config": config}]}
    )


def _backfill_pipeline(api: Api) -> str:
    return api.create_pipeline(plan=daily_plan())


DAYS = {"param": "day", "from": "2013-01-01", "to": "2013-01-02"}


def _backfill(api: Api) -> str:
    return api.call("POST", f"/pipelines/{_backfill_pipeline(api)}/backfills", DAYS).body["id"]


def _token(api: Api) -> str:
    a = api.call("POST", "/tokens", {"name": uuid.uuid4().hex, "role": VIEWER})
    return a.body["id"]


ENDPOINTS: list[tuple[str, str, Prepare, set[str], int]] = [
    ("GET", "list pipelines", lambda a: ("/pipelines", None), ANYONE, 200),
    (
        "POST",
        "create pipeline",
        lambda a: ("/pipelines", {"name": uuid.uuid4().hex, "plan": PLAN}),
        ADMIN_ONLY,
        201,
    ),
    ("GET", "get pipeline", lambda a: (f"/pipelines/{_pipeline(a)}", None), ANYONE, 200),
    (
        "PATCH",
        "patch pipeline",
        lambda a: (f"/pipelines/{_pipeline(a)}", {"plan": PLAN}),
        ADMIN_ONLY,
        200,
    ),
    ("GET", "revisions", lambda a: (f"/pipelines/{_pipeline(a)}/revisions", None), ANYONE, 200),
    ("GET", "revision", lambda a: (f"/pipelines/{_pipeline(a)}/revisions/1", None), ANYONE, 200),
    ("POST", "trigger", lambda a: (f"/pipelines/{_pipeline(a)}/runs", {}), OPERATE, 201),
    ("GET", "list runs", lambda a: (f"/pipelines/{_pipeline(a)}/runs", None), ANYONE, 200),
    ("GET", "get run", lambda a: (f"/runs/{_queued_run(a)}", None), ANYONE, 200),
    ("GET", "list all runs", lambda a: ("/runs?status=queued", None), ANYONE, 200),
    ("POST", "cancel", lambda a: (f"/runs/{_queued_run(a)}/cancel", {}), OPERATE, 202),
    ("POST", "resume", lambda a: (f"/runs/{_failed_run(a)}/resume", {}), OPERATE, 202),
    (
        "POST",
        "create schedule",
        lambda a: (f"/pipelines/{_pipeline(a)}/schedules", {"daily_at": "06:00"}),
        ADMIN_ONLY,
        201,
    ),
    (
        "GET",
        "list schedules",
        lambda a: (f"/pipelines/{_pipeline(a)}/schedules", None),
        ANYONE,
        200,
    ),
    (
        "DELETE",
        "delete schedule",
        lambda a: ("/pipelines/{}/schedules/{}".format(*_schedule(a)), None),
        ADMIN_ONLY,
        204,
    ),
    ("GET", "backfills", lambda a: (f"/pipelines/{_pipeline(a)}/backfills", None), ANYONE, 200),
    (
        "POST",
        "create backfill",
        lambda a: (f"/pipelines/{_backfill_pipeline(a)}/backfills", DAYS),
        OPERATE,
        201,
    ),
    ("GET", "backfill", lambda a: (f"/backfills/{_backfill(a)}", None), ANYONE, 200),
    ("POST", "cancel backfill", lambda a: (f"/backfills/{_backfill(a)}/cancel", {}), OPERATE, 202),
    ("POST", "rerun", lambda a: (f"/runs/{_failed_run(a)}/rerun", {}), OPERATE, 201),
    ("GET", "cursors", lambda a: (f"/pipelines/{_cursor_pipeline(a)}/cursors", None), ANYONE, 200),
    (
        "PUT",
        "set cursor",
        lambda a: (f"/pipelines/{_cursor_pipeline(a)}/cursors/read", {"value": 5}),
        ADMIN_ONLY,
        200,
    ),
    (
        "DELETE",
        "reset cursor",
        lambda a: (f"/pipelines/{_cursor_pipeline(a)}/cursors/read", None),
        ADMIN_ONLY,
        204,
    ),
    (
        "DELETE",
        "reset cursors",
        lambda a: (f"/pipelines/{_cursor_pipeline(a)}/cursors", None),
        ADMIN_ONLY,
        204,
    ),
    ("GET", "audit", lambda a: ("/audit", None), ADMIN_ONLY, 200),
    ("DELETE", "delete pipeline", lambda a: (f"/pipelines/{_pipeline(a)}", None), ADMIN_ONLY, 204),
    ("GET", "list tokens", lambda a: ("/tokens", None), ADMIN_ONLY, 200),
    (
        "POST",
        "create token",
        lambda a: ("/tokens", {"name": uuid.uuid4().hex, "role": VIEWER}),
        ADMIN_ONLY,
        201,
    ),
    ("DELETE", "revoke token", lambda a: (f"/tokens/{_token(a)}", None), ADMIN_ONLY, 204),
    ("POST", "rotate token", lambda a: (f"/tokens/{_token(a)}/rotate", {}), ADMIN_ONLY, 200),
]


@pytest.mark.parametrize(
    ("method", "prepare", "allowed", "success"),
    [pytest.param(m, p, r, s, id=name) for m, name, p, r, s in ENDPOINTS],
)
def test_role_matrix(
    api: Api, method: str, prepare: Prepare, allowed: set[str], success: int
) -> None:
    answers: dict[str, int] = {}
    for caller in ("no token", "bad token", VIEWER, OPERATOR, ADMIN):
        path, body = prepare(api)
        if caller == "no token":
            a = api.call(method, path, body, role=None)
        elif caller == "bad token":
            a = api.call(method, path, body, token="not-a-token")
        else:
            a = api.call(method, path, body, role=caller)
        answers[caller] = a.status
        if a.status == 401:
            assert a.headers["www-authenticate"].startswith("Bearer")
            assert a.body["error"]["code"] == "unauthorized"
        if a.status == 403:
            assert a.body["error"]["code"] == "forbidden"
    expected = {"no token": 401, "bad token": 401}
    expected |= {role: success if role in allowed else 403 for role in (VIEWER, OPERATOR, ADMIN)}
    assert answers == expected


def test_public_endpoints_need_no_token(api: Api) -> None:
    assert api.call("GET", "/health", role=None).status == 200
    assert api.call("GET", "/openapi.json", role=None).status == 200


def test_malformed_authorization_headers_are_401(api: Api) -> None:
    for header in ("", "Bearer", "Basic YWRtaW46eA==", f"Token {'x' * 10}"):
        a = api.call("GET", "/pipelines", role=None, headers={"Authorization": header})
        assert a.status == 401, header


def test_only_the_token_hash_is_stored(api: Api) -> None:
    rows = api.sql("SELECT token_hash FROM principals")
    assert rows and all(len(h) == 64 and int(h, 16) >= 0 for (h,) in rows)
    assert not api.sql("SELECT 1 FROM principals WHERE token_hash LIKE '%%token%%'")
