"""`etl migrate` and `etl seed` against a real database, run as separate
processes with their own environment (the only way the CLI gets configuration)."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg2

from service.domain.principals import hash_token

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


def test_token_is_a_client_command_that_needs_an_api_token(db_url: str) -> None:
    r = etl(db_url, "token", "create", "--role", "pipeline_viewer", "--name", "dash")
    assert r.returncode == 2 and "ETL_TOKEN is not set" in r.stderr
    assert principals(db_url) == []
