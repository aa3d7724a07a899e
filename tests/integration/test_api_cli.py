"""`etl migrate`, `etl seed` and `etl token create` against a real database, run as separate
processes with their own environment (the only way the CLI gets configuration)."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg2

from service.auth import hash_token

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
        r = etl(db_url, "seed", admin_token="admin-secret-1")
        assert r.returncode == 0, r.stderr
        assert "admin-secret-1" not in r.stdout
    assert principals(db_url) == [
        ("pipeline_admin", "pipeline_admin", hash_token("admin-secret-1"))
    ]
    rotated = etl(db_url, "seed", admin_token="admin-secret-2")
    assert rotated.returncode == 0
    assert principals(db_url)[0][2] == hash_token("admin-secret-2")


def test_seed_without_a_token_generates_one_and_prints_it_once(db_url: str) -> None:
    first = etl(db_url, "seed")
    assert first.returncode == 0, first.stderr
    token = first.stdout.strip().rsplit(" ", 1)[-1]
    assert principals(db_url) == [("pipeline_admin", "pipeline_admin", hash_token(token))]
    second = etl(db_url, "seed")
    assert second.returncode == 0 and token not in second.stdout
    assert principals(db_url)[0][2] == hash_token(token)


def test_token_create_prints_a_new_token_for_the_role(db_url: str) -> None:
    r = etl(db_url, "token", "create", "--role", "pipeline_viewer", "--name", "dash")
    assert r.returncode == 0, r.stderr
    token = r.stdout.strip()
    assert principals(db_url) == [("dash", "pipeline_viewer", hash_token(token))]
    again = etl(db_url, "token", "create", "--role", "pipeline_operator", "--name", "dash")
    assert again.returncode == 1 and "dash" in again.stderr
    bad_role = etl(db_url, "token", "create", "--role", "root", "--name", "x")
    assert bad_role.returncode == 2
