"""Tokens through the REST API on a real database (the in-process app): create (the secret
once), list (never a secret), revoke and rotate (the old secret answers 401 at once), expiry
on the database clock, the last use written at most once a minute, names reusable after a
revocation, the audit of every token event; and failed bearer tokens counted, audited at
most once a minute per address and answered after a penalty that grows and resets."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import psycopg2
import pytest

from drills import ApiClient
from service.domain.authfailures import PENALTY_SLOTS, penalty_s
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


def test_answers_with_a_secret_are_never_cached(api: Api) -> None:
    made = api.call("POST", "/tokens", {"name": "ci", "role": VIEWER})
    assert made.headers.get("cache-control") == "no-store"
    rotated = api.call("POST", f"/tokens/{made.body['id']}/rotate")
    assert rotated.headers.get("cache-control") == "no-store"
    assert "no-store" not in api.call("GET", "/tokens").headers.get("cache-control", "")


def admin_id(api: Api) -> str:
    return str(api.sql("SELECT id FROM principals WHERE name = %s", (ADMIN,))[0][0])


def test_the_last_live_admin_token_cannot_be_revoked(api: Api) -> None:
    seeded = admin_id(api)
    last = api.call("DELETE", f"/tokens/{seeded}")  # the caller's own token, the only admin
    assert (last.status, last.body["error"]["code"]) == (409, "last_admin")
    assert status_with(api, TOKENS[ADMIN]) == 200 and audit(api, "token.revoke") == []
    expiring = create(api, "second", role=ADMIN, expires_in_s=3600)
    api.sql(
        "UPDATE principals SET expires_at = now() - interval '1 second' WHERE id = %s",
        (expiring["id"],),
    )
    # an expired admin token is no admin: still the last one
    assert api.call("DELETE", f"/tokens/{seeded}").status == 409
    other = create(api, "third", role=ADMIN)
    assert api.call("DELETE", f"/tokens/{seeded}").status == 204  # another live admin exists
    refused = api.call("DELETE", f"/tokens/{other['id']}", token=other["token"])
    assert (refused.status, refused.body["error"]["code"]) == (409, "last_admin")
    rotated = api.call("POST", f"/tokens/{other['id']}/rotate", token=other["token"])
    assert rotated.status == 200  # rotating keeps an admin: allowed
    # other roles' tokens are revoked as before
    viewers = api.sql("SELECT id FROM principals WHERE role = %s", (VIEWER,))
    for (viewer,) in viewers:
        gone = api.call("DELETE", f"/tokens/{viewer}", token=rotated.body["token"])
        assert gone.status == 204


def test_the_last_permanent_admin_token_cannot_be_revoked_or_expired_away(api: Api) -> None:
    # Regression: an expiring admin revoked the last permanent one; once it expired, nobody
    # was admin.
    seeded = admin_id(api)
    expiring = create(api, "temporary", role=ADMIN, expires_in_s=3600)
    for method, path, body in [
        ("DELETE", f"/tokens/{seeded}", None),
        ("POST", f"/tokens/{seeded}/rotate", {"expires_in_s": 60}),
    ]:
        refused = api.call(method, path, body, token=expiring["token"])
        assert (refused.status, refused.body["error"]["code"]) == (409, "last_admin"), path
    own = api.call("POST", f"/tokens/{seeded}/rotate", {"expires_in_s": 60})
    assert (own.status, own.body["error"]["code"]) == (409, "last_admin")
    assert status_with(api, TOKENS[ADMIN]) == 200
    assert api.sql("SELECT expires_at FROM principals WHERE id = %s", (seeded,)) == [(None,)]
    # the expiring one may go, and with another permanent admin the seeded one may too
    assert api.call("DELETE", f"/tokens/{expiring['id']}").status == 204
    other = create(api, "second", role=ADMIN)
    rotated = api.call("POST", f"/tokens/{seeded}/rotate", {"expires_in_s": 60})
    assert rotated.status == 200 and rotated.body["expires_at"] is not None
    last = api.call("DELETE", f"/tokens/{other['id']}", token=rotated.body["token"])
    assert (last.status, last.body["error"]["code"]) == (409, "last_admin")
    assert api.call("DELETE", f"/tokens/{seeded}", token=other["token"]).status == 204


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


def test_failures_a_valid_token_clears_are_audited_first(api: Api) -> None:
    # Regression: the failures not yet in the audit vanished with the count.
    for _ in range(3):
        status_with(api, "guess-0123456789")
    api.sql("UPDATE auth_failures SET last_failed_at = now() - interval '2 seconds'")
    assert status_with(api, TOKENS[VIEWER]) == 200
    assert failures(api) == []
    rows = audit(api, "auth.failed")
    assert sum(r[3]["failures"] for r in rows) == 3
    assert rows[-1][2] == "127.0.0.1" and rows[-1][3]["consecutive"] == 3
    assert rows[-1][3]["cleared_by"] == VIEWER


def test_the_count_starts_over_after_a_quiet_quarter_hour(api: Api) -> None:
    status_with(api, "guess-0123456789")
    status_with(api, "guess-0123456789")
    api.sql("UPDATE auth_failures SET last_failed_at = now() - interval '16 minutes'")
    status_with(api, "guess-0123456789")
    assert api.sleeps == [0.1, 0.2, 0.1]


def test_past_the_penalty_slots_a_failure_is_answered_at_once(app_factory) -> None:
    """A flood of guesses cannot hold every thread: PENALTY_SLOTS waits at once, then a
    guess is answered without one (still counted), and a valid token still answers."""
    release = threading.Event()
    asleep = threading.Semaphore(0)

    def sleep(_delay_s: float) -> None:  # a wait that lasts until the test releases it
        asleep.release()
        release.wait(30)

    api = app_factory(sleep=sleep)
    guesses = [
        threading.Thread(target=status_with, args=(api, "guess-0123456789"))
        for _ in range(PENALTY_SLOTS)
    ]
    for t in guesses:
        t.start()
    try:
        for _ in range(PENALTY_SLOTS):
            assert asleep.acquire(timeout=30), "a guess never reached its wait"
        assert status_with(api, "guess-0123456789") == 401  # every slot taken: no wait
        assert len(api.sleeps) == PENALTY_SLOTS
        assert failures(api)[0][1] == PENALTY_SLOTS + 1  # counted all the same
        assert status_with(api, TOKENS[VIEWER]) == 200
    finally:
        release.set()
        for t in guesses:
            t.join(30)
    assert status_with(api, "guess-0123456789") == 401
    assert len(api.sleeps) == PENALTY_SLOTS + 1  # the slots are free again: this one waited


@pytest.mark.parametrize("path", ["/tokens", "/tokens/00000000-0000-4000-8000-000000000000"])
def test_tokens_are_admin_only(api: Api, path: str) -> None:
    method = "GET" if path == "/tokens" else "DELETE"
    assert api.call(method, path, role=VIEWER).status == 403


def answering_pids(log: Path, path: str) -> set[int]:
    """The pids of the gunicorn workers whose access log lines name `path`."""
    pids = set()
    for line in log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("logger") == "gunicorn.access" and path in entry.get("message", ""):
            pids.add(entry["pid"])
    return pids


def answer_from_two_workers(client: ApiClient, log: Path, path: str) -> list[int]:
    """Bursts of parallel `GET path` on new connections until two gunicorn workers have
    answered (their pids in the access log); the statuses of every answer."""
    statuses: list[int] = []
    for _ in range(10):
        burst = [
            threading.Thread(target=lambda: statuses.append(client.call("GET", path)[0]))
            for _ in range(API_WORKERS * 2)
        ]
        for t in burst:
            t.start()
        for t in burst:
            t.join(30)
        time.sleep(0.2)  # the access log line is written after the answer
        if len(answering_pids(log, path)) >= 2:
            return statuses
    raise AssertionError(f"one worker answered every {path}: {answering_pids(log, path)}")


def test_the_count_and_a_revocation_are_seen_by_every_gunicorn_worker(
    server: str, gunicorn_log: Path, db_url: str
) -> None:
    """Real gunicorn with several workers, answers from two of them at least: one count of
    failures and one audit row per burst, whichever worker answered; a revoked token is
    refused by every worker at once."""
    base = server.removesuffix("/api/v1")
    guesser = ApiClient(base, "guess-0123456789", timeout_s=30)
    guessed = answer_from_two_workers(guesser, gunicorn_log, "/pipelines?limit=1")
    assert set(guessed) == {401}
    admin = ApiClient(base, TOKENS[ADMIN], timeout_s=30)
    status, made = admin.call("POST", "/tokens", {"name": "ci", "role": VIEWER})
    assert status == 201
    assert admin.call("DELETE", f"/tokens/{made['id']}")[0] == 204
    revoked = answer_from_two_workers(
        ApiClient(base, made["token"], timeout_s=30), gunicorn_log, "/pipelines?limit=2"
    )
    assert set(revoked) == {401}
    conn = psycopg2.connect(db_url)
    try:
        with conn, conn.cursor() as cur:
            # the admin's calls cleared the guesses' count (their last penalty was over)
            cur.execute("SELECT failures FROM auth_failures")
            assert cur.fetchall() == [(len(revoked),)]
            cur.execute("SELECT details FROM audit WHERE action = 'auth.failed' ORDER BY id")
            rows = [d for (d,) in cur.fetchall()]
            # one per burst, and the first burst's unaudited failures as the admin cleared them
            assert [d["consecutive"] for d in rows[::2]] == [1, 1]
            assert rows[1]["cleared_by"] == ADMIN and rows[1]["consecutive"] > 1
    finally:
        conn.close()
