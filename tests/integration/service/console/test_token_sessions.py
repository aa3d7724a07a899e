"""Console sessions follow their token (falcon's TestClient on a real database): a session
signed in with a token ends at once when the token is revoked, rotated, expires, or when
the admin token is re-seeded; failed sign-ins are counted, audited and slowed like bad
bearer tokens; a console request writes its token's last use. And a pipeline's Pause,
Unpause and Delete (with its confirmation page), and a paused fire's reason in the table."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from service.console import ConsoleSettings
from service.domain.db import Database
from service.domain.principals import ADMIN, VIEWER, seed_admin
from service.domain.schedules import fire_schedule
from tests.integration.testapp import TOKENS, Api

from .console_client import ConsoleClient


@pytest.fixture
def api(app_factory, tmp_path: Path) -> Api:
    settings = ConsoleSettings(
        data_dir=tmp_path, export_dir=tmp_path / "exports", reject_dir=tmp_path / "rejects"
    )
    return app_factory(console=settings)


def browser(api: Api, token: str) -> ConsoleClient:
    c = ConsoleClient(api.client.app)
    assert c.sign_in(token).status_code == 303
    assert c.get("/ui/").status_code == 200
    return c


def signed_out(c: ConsoleClient) -> bool:
    """The session no longer works: a page sends to sign-in, a form POST is a 401."""
    page = c.get("/ui/")
    post = c.post("/ui/logout", csrf=c.csrf)
    return (page.status_code, page.headers.get("location", "").endswith("/ui/login")) == (
        303,
        True,
    ) and post.status_code == 401


def new_token(api: Api, role: str = VIEWER) -> dict:
    made = api.call("POST", "/tokens", {"name": f"t-{len(api.sleeps)}-{role}", "role": role})
    assert made.status == 201
    return made.body


def test_revoking_a_token_ends_its_console_session_at_once(api: Api) -> None:
    token = new_token(api)
    c = browser(api, token["token"])
    other = browser(api, TOKENS[VIEWER])
    assert api.call("DELETE", f"/tokens/{token['id']}").status == 204
    assert signed_out(c)
    assert other.get("/ui/").status_code == 200  # another token's session goes on
    (details,) = api.sql("SELECT details FROM audit WHERE action = 'token.revoke'")[0]
    assert details["sessions_ended"] == 1
    assert ConsoleClient(api.client.app).sign_in(token["token"]).status_code == 401


def test_console_use_writes_the_token_s_last_use_at_most_once_a_minute(api: Api) -> None:
    token = new_token(api)
    c = browser(api, token["token"])

    def used(ago_s: int) -> tuple:
        api.sql(
            "UPDATE principals SET last_used_at = now() - make_interval(secs => %s)"
            " WHERE id = %s RETURNING last_used_at",
            (ago_s, token["id"]),
        )
        before = api.sql("SELECT last_used_at FROM principals WHERE id = %s", (token["id"],))
        assert c.get("/ui/").status_code == 200
        after = api.sql("SELECT last_used_at FROM principals WHERE id = %s", (token["id"],))
        return before[0][0], after[0][0]

    before, after = used(30)
    assert after == before  # used within the minute: not written again
    before, after = used(61)
    assert after > before


def test_rotating_a_token_ends_its_console_sessions_and_the_new_secret_signs_in(api: Api) -> None:
    token = new_token(api, ADMIN)
    c = browser(api, token["token"])
    rotated = api.call("POST", f"/tokens/{token['id']}/rotate").body
    assert signed_out(c)
    assert browser(api, rotated["token"]).get("/ui/audit").status_code == 200


def test_an_expired_token_ends_its_session(api: Api) -> None:
    token = new_token(api)
    c = browser(api, token["token"])
    api.sql("UPDATE principals SET expires_at = now() WHERE id = %s", (token["id"],))
    assert signed_out(c)


def test_reseeding_the_admin_token_ends_the_old_token_s_sessions(api: Api) -> None:
    c = browser(api, TOKENS[ADMIN])
    db = Database(api.db_url)
    try:
        with db.transaction() as cur:
            seed_admin(cur, "a-brand-new-admin-token-0001")
    finally:
        db.close()
    assert signed_out(c)
    assert ConsoleClient(api.client.app).sign_in(TOKENS[ADMIN]).status_code == 401
    assert browser(api, "a-brand-new-admin-token-0001").get("/ui/audit").status_code == 200


def test_failed_sign_ins_are_slowed_audited_and_reset_by_a_good_one(api: Api) -> None:
    c = ConsoleClient(api.client.app)
    for _ in range(3):
        assert c.sign_in("not-a-token-at-all-000000").status_code == 401
    assert api.sleeps == [0.1, 0.2, 0.4]
    (details,) = api.sql("SELECT details FROM audit WHERE action = 'auth.failed'")[0]
    assert details["via"] == "sign_in"
    api.sql("UPDATE auth_failures SET last_failed_at = now() - interval '2 seconds'")
    assert c.sign_in(TOKENS[VIEWER]).status_code == 303
    assert api.sql("SELECT count(*) FROM auth_failures") == [(0,)]
    assert ConsoleClient(api.client.app).sign_in("").status_code == 401  # empty: no guess
    assert api.sleeps == [0.1, 0.2, 0.4]


def test_pause_unpause_and_delete_from_the_pipeline_page(api: Api) -> None:
    pid = api.create_pipeline("paged")
    admin = browser(api, TOKENS[ADMIN])
    page = admin.get(f"/ui/pipelines/{pid}").text
    assert 'id="pause"' in page and f'href="/ui/pipelines/{pid}/delete"' in page
    paused = admin.post(f"/ui/pipelines/{pid}/pause", csrf=admin.csrf)
    assert paused.status_code == 303 and "notice=pipeline_paused" in paused.headers["location"]
    page = admin.get(f"/ui/pipelines/{pid}").text
    assert 'id="unpause"' in page and "Triggers are refused" in page
    assert api.call("GET", f"/pipelines/{pid}").body["paused"] is True
    admin.post(f"/ui/pipelines/{pid}/unpause", csrf=admin.csrf)
    assert api.call("GET", f"/pipelines/{pid}").body["paused"] is False

    viewer = browser(api, TOKENS[VIEWER])
    assert 'id="pause"' not in viewer.get(f"/ui/pipelines/{pid}").text
    assert viewer.post(f"/ui/pipelines/{pid}/pause", csrf=viewer.csrf).status_code == 403
    assert viewer.get(f"/ui/pipelines/{pid}/delete").status_code == 403

    run_id = api.trigger(pid).body["id"]
    confirm = admin.get(f"/ui/pipelines/{pid}/delete")
    assert confirm.status_code == 200 and 'id="confirm-delete"' in confirm.text
    refused = admin.post(f"/ui/pipelines/{pid}/delete", csrf=admin.csrf)
    assert refused.status_code == 409 and "queued or running" in refused.text
    api.call("POST", f"/runs/{run_id}/cancel")
    admin.get(f"/ui/pipelines/{pid}/delete")
    deleted = admin.post(f"/ui/pipelines/{pid}/delete", csrf=admin.csrf)
    assert deleted.status_code == 303
    assert deleted.headers["location"].endswith("/ui/?notice=pipeline_deleted")
    assert admin.get(f"/ui/pipelines/{pid}").status_code == 404
    assert "paged" not in admin.get("/ui/").text.split("</header>")[1].replace(
        "Pipeline deleted", ""
    )
    assert admin.get(f"/ui/runs/{run_id}").status_code == 200  # the history stays readable
    actions = [r[0] for r in api.sql("SELECT action FROM audit ORDER BY id")]
    assert [a for a in actions if a.startswith("pipeline.") and a != "pipeline.create"] == [
        "pipeline.pause",
        "pipeline.unpause",
        "pipeline.delete",
    ]


SECRET = re.compile(r'id="issued-secret"[^>]*value="([^"]+)"')


def test_the_tokens_page_creates_rotates_and_revokes(api: Api) -> None:
    admin = browser(api, TOKENS[ADMIN])
    assert 'href="/ui/tokens"' in admin.get("/ui/").text
    made = admin.post("/ui/tokens", {"name": "from-ui", "role": VIEWER, "expires": "7 days"},
                      csrf=admin.csrf)  # fmt: skip
    assert made.status_code == 201, made.text
    secret = SECRET.search(made.text).group(1)
    assert status_of(api, secret) == 200
    listed = admin.get("/ui/tokens").text
    assert "from-ui" in listed and secret not in listed  # shown once only
    (token_id,) = api.sql("SELECT id::text FROM principals WHERE name = 'from-ui'")[0]

    rotated = admin.post(f"/ui/tokens/{token_id}/rotate", csrf=admin.csrf)
    new_secret = SECRET.search(rotated.text).group(1)
    assert (status_of(api, secret), status_of(api, new_secret)) == (401, 200)
    revoked = admin.post(f"/ui/tokens/{token_id}/revoke", csrf=admin.csrf)
    assert revoked.status_code == 303 and "notice=token_revoked" in revoked.headers["location"]
    assert status_of(api, new_secret) == 401
    assert "Token revoked" in admin.get("/ui/tokens?notice=token_revoked").text

    for form, words in [
        ({"name": "x", "role": "root", "expires": "never"}, "role"),
        ({"name": "x", "role": VIEWER, "expires": "forever"}, "expires"),
        ({"name": "", "role": VIEWER, "expires": "never"}, "name"),
    ]:
        bad = admin.post("/ui/tokens", form, csrf=admin.csrf)
        assert bad.status_code == 400 and words in bad.text, form
    viewer = browser(api, TOKENS[VIEWER])
    assert viewer.get("/ui/tokens").status_code == 403
    assert 'href="/ui/tokens"' not in viewer.get("/ui/").text


def status_of(api: Api, token: str) -> int:
    return api.call("GET", "/pipelines", token=token).status


def test_a_paused_pipeline_s_fire_says_why_it_made_no_run(api: Api) -> None:
    """The schedule's REST answer and the pipeline page's schedules table name the reason
    (`paused`); a fire that admits a run clears it."""
    pid = api.create_pipeline("sleepy")
    made = api.call("POST", f"/pipelines/{pid}/schedules", {"every_minutes": 5}).body
    assert made["last_skip_reason"] is None
    assert api.call("POST", f"/pipelines/{pid}/pause").status == 200
    fire_time = datetime(2026, 11, 29, 13, 5, tzinfo=UTC)
    db = Database(api.db_url)
    try:
        with db.transaction() as cur:
            fired = fire_schedule(cur, made["id"], fire_time, fire_time)
        assert fired is not None and fired.admission is None and fired.skip == "paused"
        (listed,) = api.call("GET", f"/pipelines/{pid}/schedules").body["items"]
        assert (listed["last_skip_reason"], listed["last_run_id"]) == ("paused", None)
        page = browser(api, TOKENS[VIEWER]).get(f"/ui/pipelines/{pid}").text
        assert "no run: paused" in page
        assert api.call("POST", f"/pipelines/{pid}/unpause").status == 200
        with db.transaction() as cur:
            fire_schedule(cur, made["id"], fire_time + timedelta(minutes=5), fire_time)
        (listed,) = api.call("GET", f"/pipelines/{pid}/schedules").body["items"]
        assert listed["last_skip_reason"] is None and listed["last_run_id"] is not None
    finally:
        db.close()
