"""`etl migrate` and `etl seed` against a real database, run as separate
processes with their own environment (the only way the CLI gets configuration)."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg2

from service.domain.db import Database
from service.domain.principals import ADMIN, find_principal, hash_token

ETL = "import sys; from service.cli import main; sys.exit(main(sys.argv[1:]))"


def etl(db_url: str, *args: str, admin_token: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETL_")}
    env.update({"ETL_DATABASE_URL": db_url, "ETL_SANDBOX_URL": db_url})
    if admin_token:
        env["ETL_ADMIN_TOKEN"] = admin_token
    return subprocess.run(
        [sys.executable, "-c", ETL, *args], env=env, capture_output=True, text=True, timeout=60
    )


def principals(db_url: str) -> list[tuple[str, str, str]]:
    conn = psycopg2.connect(db_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT name, role, token_hash FROM principals ORDER BY name")
            return cur.fetchall()
    finally:
        conn.close()


def test_migrate_on_a_migrated_database_changes_nothing(db_url: str) -> None:
    r = etl(db_url, "migrate")
    assert (r.returncode, r.stdout.strip()) == (0, "up to date"), r.stderr


def test_seed_from_the_environment_is_idempotent(db_url: str) -> None:
    for _ in range(2):
        r = etl(db_url, "seed", admin_token="admin-secret-0001-x")
        assert r.returncode == 0, r.stderr
        assert "admin-secret-0001-x" not in r.stdout
    assert principals(db_url) == [
        ("pipeline_admin", "pipeline_admin", hash_token("admin-secret-0001-x"))
    ]
    rotated = etl(db_url, "seed", admin_token="admin-secret-0002-x")
    assert rotated.returncode == 0
    assert principals(db_url)[0][2] == hash_token("admin-secret-0002-x")


def test_seed_refuses_a_short_or_white_space_token_and_changes_nothing(db_url: str) -> None:
    # Regression: "a" was accepted, and a white-space token locked the admin out.
    for bad, words in [
        ("a", "at least 16 characters, got 1"),
        ("x" * 15, "at least 16 characters, got 15"),
        (" " * 20, "white space"),
        ("admin secret 0123456", "white space"),
        ("admin-secret-0123\t", "white space"),
    ]:
        r = etl(db_url, "seed", admin_token=bad)
        assert r.returncode == 2, (bad, r.stdout, r.stderr)
        assert "ETL_ADMIN_TOKEN" in r.stderr and words in r.stderr
    assert principals(db_url) == []
    ok = etl(db_url, "seed", admin_token="x" * 16)
    assert ok.returncode == 0, ok.stderr


def test_seed_without_a_token_generates_one_and_prints_it_once(db_url: str) -> None:
    first = etl(db_url, "seed")
    assert first.returncode == 0, first.stderr
    token = first.stdout.strip().rsplit(" ", 1)[-1]
    assert principals(db_url) == [("pipeline_admin", "pipeline_admin", hash_token(token))]
    second = etl(db_url, "seed")
    assert second.returncode == 0 and token not in second.stdout
    assert principals(db_url)[0][2] == hash_token(token)


def test_seed_never_brings_back_a_replaced_token(db_url: str) -> None:
    assert etl(db_url, "seed", admin_token="admin-secret-0001-x").returncode == 0
    assert etl(db_url, "seed", admin_token="admin-secret-0002-x").returncode == 0
    back = etl(db_url, "seed", admin_token="admin-secret-0001-x")
    assert back.returncode == 0  # a restart with the old variable still starts
    assert "revoked or rotated away" in back.stderr
    assert principals(db_url)[0][2] == hash_token("admin-secret-0002-x")
    conn = psycopg2.connect(db_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT principal, details->>'outcome' FROM audit"
                        " WHERE action = 'token.seed' ORDER BY id")  # fmt: skip
            assert cur.fetchall() == [("etl seed", "created"), ("etl seed", "replaced")]
    finally:
        conn.close()


def live_admin(db_url: str, token: str) -> bool:
    """Whether `token` authenticates as `pipeline_admin` (the API's own lookup)."""
    db = Database(db_url, max_connections=1, application_name="etl-test")
    try:
        found = find_principal(db, token)
    finally:
        db.close()
    return found is not None and found.role == ADMIN


def expire_admin(db_url: str) -> None:
    """The admin's token expired (as after a rotation with `expires_in_s: 2`)."""
    conn = psycopg2.connect(db_url)
    try:
        with conn, conn.cursor() as cur:
            cur.execute(
                "UPDATE principals SET expires_at = now() - interval '1 second'"
                " WHERE name = 'pipeline_admin'"
            )
    finally:
        conn.close()


def test_seed_brings_back_an_expired_admin(db_url: str) -> None:
    # Regression: the seeded token kept the old `expires_at` and answered 401.
    assert etl(db_url, "seed", admin_token="admin-secret-0001-x").returncode == 0
    expire_admin(db_url)
    assert not live_admin(db_url, "admin-secret-0001-x")
    new = etl(db_url, "seed", admin_token="admin-secret-0002-x")
    assert new.returncode == 0 and "seeded" in new.stdout, new.stderr
    assert live_admin(db_url, "admin-secret-0002-x")
    expire_admin(db_url)
    same = etl(db_url, "seed", admin_token="admin-secret-0002-x")
    assert same.returncode == 0, same.stderr
    assert live_admin(db_url, "admin-secret-0002-x")
    expire_admin(db_url)
    generated = etl(db_url, "seed")
    assert generated.returncode == 0, generated.stderr
    shown = generated.stdout.strip().rsplit(" ", 1)[-1]
    assert live_admin(db_url, shown) and not live_admin(db_url, "admin-secret-0002-x")


def test_token_create_on_the_server_host_needs_no_api_token(db_url: str) -> None:
    # The contract (round 1, round 4): database reachable and ETL_ADMIN_TOKEN set as for
    # `etl seed`; the new token alone on stdout.
    admin = "admin-secret-0001-x"
    assert etl(db_url, "seed", admin_token=admin).returncode == 0
    r = etl(db_url, "token", "create", "--role", "pipeline_viewer", "--name", "dash",
            admin_token=admin)  # fmt: skip
    assert r.returncode == 0, r.stderr
    token = r.stdout.strip()
    assert len(token.split()) == 1 and "dash" in r.stderr
    assert [p[:2] for p in principals(db_url)] == [
        ("dash", "pipeline_viewer"),
        ("pipeline_admin", "pipeline_admin"),
    ]
    assert hash_token(token) in {p[2] for p in principals(db_url)}
    again = etl(db_url, "token", "create", "--role", "pipeline_viewer", "--name", "dash",
                admin_token=admin)  # fmt: skip
    assert again.returncode == 1 and "dash" in again.stderr
    bad_role = etl(db_url, "token", "create", "--role", "root", "--name", "x", admin_token=admin)
    assert bad_role.returncode == 2 and "pipeline_viewer" in bad_role.stderr
    wrong = etl(db_url, "token", "create", "--role", "pipeline_viewer", "--name", "y",
                admin_token="not-the-admin-token-x")  # fmt: skip
    assert wrong.returncode == 2 and "ETL_ADMIN_TOKEN" in wrong.stderr
    neither = etl(db_url, "token", "create", "--role", "pipeline_viewer", "--name", "z")
    assert neither.returncode == 2
    assert "ETL_TOKEN" in neither.stderr and "ETL_ADMIN_TOKEN" in neither.stderr
    assert len(principals(db_url)) == 2


def test_the_other_token_commands_are_api_client_commands(db_url: str) -> None:
    r = etl(db_url, "token", "list", admin_token="admin-secret-0001-x")
    assert r.returncode == 2 and "ETL_TOKEN is not set" in r.stderr
