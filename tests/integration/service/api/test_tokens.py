"""Tokens through the REST API on a real database (the in-process app): create (the secret
once), list (never a secret), revoke and rotate (the old secret answers 401 at once), expiry
on the database clock, the last use written at most once a minute, names reusable after a
revocation, the audit of every token event; and failed bearer tokens counted, audited at
most once a minute per address and answered after a penalty that grows and resets."""

from __future__ import annotations

import psycopg2
import pytest

from drills import ApiClient
from service.domain.authfailures import penalty_s
from service.domain.principals import ADMIN, VIEWER, hash_token
from tests.integration.testapp import API_WORKERS, TOKENS, Api

FIELDS = {"id", "name", "role", "created_at", "last_used_at", "expires_at", "revoked_at"}


def create(api: Api, name: str = "ci", role: str = VIEWER, **extra) -> dict:
    a = api.call("POST", "/tokens", {"name": name, "role": role, **extra})
    assert a.status == 201, a.body
    return a.body


def status_with(api: Api, token: str) -> int:
    return api.call("GET", "/pipelines", token=token).status


def audit(api: Api, action: str) -> list[tuple]:
    return api.sql(
        "SELECT principal, entity_type, entity_id, details FROM audit WHERE action = %s"
        " ORDER BY id",
        (action,),
    )


def test_create_shows_the_secret_once_and_the_list_never(api: Api) -> None:
    made = create(api, "dashboard", expires_in_s=3600)
    assert set(made) == FIELDS | {"token"} and made["role"] == VIEWER
    assert made["expires_at"] is not None and made["last_used_at"] is None
    assert api.call("POST", "/tokens", {"name": "x", "role": ADMIN}).headers["location"]
    listed = api.call("GET", "/tokens").body
    assert listed["next"] is None
    assert all(set(t) == FIELDS for t in listed["items"])
    assert made["token"] not in str(listed) and hash_token(made["token"]) not in str(listed)
    assert [t["id"] for t in listed["items"]].count(made["id"]) == 1
    # the secret works for its role: reads yes, admin calls no
    assert status_with(api, made["token"]) == 200
    assert api.call("GET", "/tokens", token=made["token"]).status == 403
    (row,) = audit(api, "token.create")[:1]
    assert row[0] == ADMIN and row[1:3] == ("token", made["id"])
    assert row[3]["name"] == "dashboard" and row[3]["expires_at"]


def test_revoke_answers_401_at_once_and_frees_the_name(api: Api) -> None:
    made = create(api)
    assert made["expires_at"] is None  # no lifetime given: it never expires
    assert status_with(api, made["token"]) == 200
    assert api.call("DELETE", f"/tokens/{made['id']}").status == 204
    assert status_with(api, made["token"]) == 401
    assert api.call("DELETE", f"/tokens/{made['id']}").status == 204  # idempotent
    (listed,) = [t for t in api.call("GET", "/tokens").body["items"] if t["id"] == made["id"]]
    assert listed["revoked_at"] is not None
    assert len(audit(api, "token.revoke")) == 1  # the repeat changed nothing
    again = create(api)  # the name is free again; the revoked token stays listed
    assert again["id"] != made["id"] and status_with(api, again["token"]) == 200
    assert api.call("DELETE", "/tokens/00000000-0000-4000-8000-000000000000").status == 404


def test_a_live_name_is_taken_and_bad_fields_are_named(api: Api) -> None:
    create(api)
    dup = api.call("POST", "/tokens", {"name": "ci", "role": VIEWER})
    assert (dup.status, dup.body["error"]["code"]) == (409, "duplicate_name")
    for body, field in [
        ({"name": "r", "role": "root"}, "role"),
        ({"role": VIEWER}, "name"),
        ({"name": "", "role": VIEWER}, "name"),
        ({"name": "e", "role": VIEWER, "expires_in_s": 0}, "expires_in_s"),
        ({"name": "e", "role": VIEWER, "expires_in_s": "1h"}, "expires_in_s"),
        ({"name": ADMIN, "role": ADMIN}, "name"),  # reserved for `etl seed`
    ]:
        a = api.call("POST", "/tokens", body)
        assert a.status == 400, body
        assert [d["field"] for d in a.body["error"]["details"]] == [field], a.body


def test_rotate_keeps_id_name_and_role_and_kills_the_old_secret(api: Api) -> None:
    made = create(api, "rotating", role=ADMIN)
    rotated = api.call("POST", f"/tokens/{made['id']}/rotate")
    assert rotated.status == 200, rotated.body
    new = rotated.body
    assert (new["id"], new["name"], new["role"]) == (made["id"], "rotating", ADMIN)
    assert new["token"] != made["token"]
    assert status_with(api, made["token"]) == 401
    assert status_with(api, new["token"]) == 200
    # a lifetime given with the rotation starts now
    later = api.call("POST", f"/tokens/{made['id']}/rotate", {"expires_in_s": 60})
    assert later.body["expires_at"] is not None
    assert [r[3]["name"] for r in audit(api, "token.rotate")] == ["rotating", "rotating"]
    api.call("DELETE", f"/tokens/{made['id']}")
    refused = api.call("POST", f"/tokens/{made['id']}/rotate")
    assert (refused.status, refused.body["error"]["code"]) == (409, "token_revoked")


def test_an_expired_token_answers_401(api: Api) -> None:
    made = create(api, expires_in_s=3600)
    assert status_with(api, made["token"]) == 200
    api.sql(
        "UPDATE principals SET expires_at = now() - interval '1 second' WHERE id = %s",
        (made["id"],),
    )
    assert status_with(api, made["token"]) == 401


def test_the_last_use_is_written_at_most_once_a_minute(api: Api) -> None:
    made = create(api)

    def last_used():
        return api.sql("SELECT last_used_at FROM principals WHERE id = %s", (made["id"],))[0][0]

    status_with(api, made["token"])
    first = last_used()
    assert first is not None
    api.sql(
        "UPDATE principals SET last_used_at = now() - interval '30 seconds' WHERE id = %s",
        (made["id"],),
    )
    recent = last_used()
    status_with(api, made["token"])
    assert last_used() == recent  # used within the minute: not written again
    api.sql(
        "UPDATE principals SET last_used_at = now() - interval '61 seconds' WHERE id = %s",
        (made["id"],),
    )
    status_with(api, made["token"])
    assert last_used() > recent
    (listed,) = [t for t in api.call("GET", "/tokens").body["items"] if t["id"] == made["id"]]
    assert listed["last_used_at"] is not None


def failures(api: Api) -> list[tuple]:
    return api.sql("SELECT client_addr, failures, unaudited FROM auth_failures")


def test_bad_tokens_are_slowed_more_and_more_and_a_valid_one_resets(api: Api) -> None:
    for _ in range(7):
        assert status_with(api, "guess-0123456789") == 401
    assert api.sleeps == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    assert [penalty_s(n) for n in (1, 6, 100)] == [0.1, 2.0, 2.0]
    assert failures(api) == [("127.0.0.1", 7, 6)]  # the first one is in the audit
    # a valid token is never slowed, even from the guessing address; right after a guess it
    # leaves the count alone (interleaving a valid token undoes no penalty), later it resets it
    assert status_with(api, TOKENS[VIEWER]) == 200
    assert api.sleeps == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0] and failures(api)[0][1] == 7
    api.sql("UPDATE auth_failures SET last_failed_at = now() - interval '2 seconds'")
    assert status_with(api, TOKENS[VIEWER]) == 200
    assert len(api.sleeps) == 7 and failures(api) == []
    assert status_with(api, "guess-0123456789") == 401
    assert api.sleeps[-1] == 0.1
    # no token at all is no guess: 401 at once, not counted
    assert api.call("GET", "/pipelines", role=None).status == 401
    assert len(api.sleeps) == 8


def test_failed_tokens_are_audited_at_most_once_a_minute_per_address(api: Api) -> None:
    for _ in range(3):
        status_with(api, "guess-0123456789")
    rows = audit(api, "auth.failed")
    assert len(rows) == 1
    principal, entity_type, client, details = rows[0]
    assert (principal, entity_type, client) == ("anonymous", "client", "127.0.0.1")
    assert details == {"via": "bearer", "failures": 1, "consecutive": 1, "delay_s": 0.1}
    api.sql("UPDATE auth_failures SET audited_at = now() - interval '61 seconds'")
    status_with(api, "guess-0123456789")
    rows = audit(api, "auth.failed")
    assert len(rows) == 2 and rows[1][3]["failures"] == 3  # the two unaudited + this one
    assert rows[1][3]["consecutive"] == 4


def test_the_count_starts_over_after_a_quiet_quarter_hour(api: Api) -> None:
    status_with(api, "guess-0123456789")
    status_with(api, "guess-0123456789")
    api.sql("UPDATE auth_failures SET last_failed_at = now() - interval '16 minutes'")
    status_with(api, "guess-0123456789")
    assert api.sleeps == [0.1, 0.2, 0.1]


@pytest.mark.parametrize("path", ["/tokens", "/tokens/00000000-0000-4000-8000-000000000000"])
def test_tokens_are_admin_only(api: Api, path: str) -> None:
    method = "GET" if path == "/tokens" else "DELETE"
    assert api.call(method, path, role=VIEWER).status == 403


def test_the_count_is_shared_by_every_gunicorn_worker(server: str, db_url: str) -> None:
    """Real gunicorn with several workers, a new connection per guess: one count, one audit
    row, whichever worker answered."""
    guesser = ApiClient(server.removesuffix("/api/v1"), "guess-0123456789", timeout_s=30)
    for _ in range(API_WORKERS + 1):
        assert guesser.call("GET", "/pipelines")[0] == 401
    conn = psycopg2.connect(db_url)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("SELECT failures, unaudited FROM auth_failures")
            assert cur.fetchall() == [(API_WORKERS + 1, API_WORKERS)]
            cur.execute("SELECT count(*) FROM audit WHERE action = 'auth.failed'")
            assert cur.fetchall() == [(1,)]
    finally:
        conn.close()
