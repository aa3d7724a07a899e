"""The migration runner against a real PostgreSQL: empty database, twice, concurrently,
and an edited applied file."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import psycopg2
import pytest

import ddl
from ddl.migrate import (
    COMMENT_EDITS,
    MIGRATIONS_DIR,
    MigrationError,
    apply_migrations,
    discover,
)
from tests.integration.conftest import PG

# The state migrations after 0015, in the order they apply (numbers are reserved apart, so
# the list has gaps).
LATER = sorted(p.name for p in MIGRATIONS_DIR.glob("*.sql") if p.name > "0016")


def _tables(url: str) -> set[str]:
    with psycopg2.connect(url) as c, c.cursor() as cur:
        cur.execute(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables"
            " WHERE table_schema IN ('public', 'dramatiq')"
        )
        return {r[0] for r in cur.fetchall()}


def _fresh_url() -> str:
    return f"{PG}/etl_mig_{uuid.uuid4().hex[:10]}"


def _drop(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    c = psycopg2.connect(f"{PG}/postgres")
    c.autocommit = True
    with c.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    c.close()


def test_empty_database_gets_every_table_and_second_run_is_a_no_op() -> None:
    url = _fresh_url()
    try:
        first = ddl.migrate(url)
        assert first == [
            "0001_state.sql", "0002_broker.sql", "0003_released_outcome.sql",
            "0004_run_purge.sql", "0005_console.sql", "0006_fusion.sql", "0007_run_error.sql",
            "0008_pipeline_pause.sql", "0009_metrics.sql", "0010_tokens_and_pipeline_delete.sql",
            "0011_webhooks.sql", "0012_run_trace.sql", "0013_metrics_pipeline_delete.sql",
            "0014_schedule_skip_reason.sql", "0015_lease_lost.sql", *LATER, "0001_sandbox.sql",
        ]  # fmt: skip
        expected = {
            "public.principals", "public.pipelines", "public.revisions", "public.runs",
            "public.step_runs", "public.attempts", "public.step_batches", "public.schedules",
            "public.audit", "public.schema_migrations", "dramatiq.queue", "public.console_sessions",
            "public.metric_totals", "public.metric_deltas", "public.executors",
            "public.webhooks", "public.webhook_deliveries",
            "public.retired_tokens", "public.auth_failures", "public.step_check_key_batches",
            "public.process_samples", "public.api_request_totals",
        }  # fmt: skip
        assert expected <= _tables(url)
        assert ddl.migrate(url) == []
    finally:
        _drop(url)


def test_two_concurrent_runners_apply_each_migration_once() -> None:
    url = _fresh_url()
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(ddl.migrate(url))
        except BaseException as exc:
            errors.append(exc)

    try:
        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        # each migration applied exactly once, whichever runner got to it first
        applied = sorted(name for names in results for name in names)
        assert applied == sorted(
            ["0001_state.sql", "0002_broker.sql", "0003_released_outcome.sql",
             "0004_run_purge.sql", "0005_console.sql", "0006_fusion.sql", "0007_run_error.sql",
             "0008_pipeline_pause.sql", "0009_metrics.sql",
             "0010_tokens_and_pipeline_delete.sql", "0011_webhooks.sql", "0012_run_trace.sql",
             "0013_metrics_pipeline_delete.sql", "0014_schedule_skip_reason.sql",
             "0015_lease_lost.sql", *LATER, "0001_sandbox.sql"]
        )  # fmt: skip
    finally:
        _drop(url)


def test_an_edited_applied_migration_is_refused(tmp_path: Path) -> None:
    url = _fresh_url()
    try:
        for src in sorted(MIGRATIONS_DIR.glob("*.sql")):
            (tmp_path / src.name).write_text(src.read_text())
        apply_migrations(url, tmp_path)
        edited = tmp_path / "0001_state.sql"
        original = edited.read_text()
        # A corrected comment is not an edit: nothing runs again, nothing is refused.
        edited.write_text("-- a corrected comment\n" + original + "\n-- another one\n")
        assert apply_migrations(url, tmp_path) == []
        edited.write_text(original + "\nCREATE TABLE edited (id int);\n")
        with pytest.raises(MigrationError, match=r"0001_state\.sql.*never edited"):
            apply_migrations(url, tmp_path)
    finally:
        _drop(url)


def test_a_database_migrated_with_whole_file_checksums_still_migrates(tmp_path: Path) -> None:
    """Before comments were left out, the whole file was hashed; those rows still match, and
    so does the earlier text of 0001 whose comment was corrected since."""
    url = _fresh_url()
    try:
        apply_migrations(url)
        with psycopg2.connect(url) as c, c.cursor() as cur:
            for m in discover():
                legacy = next(iter(COMMENT_EDITS.get(m.version, ()) or [m.raw_checksum]))
                cur.execute(
                    "UPDATE schema_migrations SET checksum = %s WHERE version = %s",
                    (legacy, m.version),
                )
        assert apply_migrations(url) == []
    finally:
        _drop(url)


def test_revisions_are_immutable(conn) -> None:
    with conn.cursor() as cur:
        pid = uuid.uuid4()
        cur.execute("INSERT INTO pipelines (id, name, revision) VALUES (%s, 'p', 1)", (str(pid),))
        cur.execute(
            "INSERT INTO revisions (pipeline_id, number, plan, created_by)"
            " VALUES (%s, 1, '{}', 'admin')",
            (str(pid),),
        )
        with pytest.raises(psycopg2.errors.RaiseException, match="immutable"):
            cur.execute("UPDATE revisions SET plan = '{\"x\": 1}'")
    conn.rollback()


def test_a_missing_database_is_created_utf8_and_a_sql_ascii_one_is_refused(tmp_path) -> None:
    """On a cluster whose default might be SQL_ASCII: `etl migrate` creates a missing
    database as UTF-8, refuses an existing SQL_ASCII one (exit 2, naming it and its
    encoding) and leaves it untouched; `/health` of an app on it says why it is not ok."""
    fresh, ascii_db = f"etl_utf8_{uuid.uuid4().hex[:8]}", f"etl_ascii_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(f"{PG}/postgres")
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(
                f"CREATE DATABASE {ascii_db} ENCODING 'SQL_ASCII' TEMPLATE template0"
                " LC_COLLATE 'C' LC_CTYPE 'C'"
            )
        created = _etl_migrate(f"{PG}/{fresh}", tmp_path)
        assert created.returncode == 0, created.stderr
        with admin.cursor() as cur:
            cur.execute(
                "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = %s",
                (fresh,),
            )
            assert cur.fetchone() == ("UTF8",)
        refused = _etl_migrate(f"{PG}/{ascii_db}", tmp_path)
        assert refused.returncode == 2, (refused.stdout, refused.stderr)
        assert f"database '{ascii_db}' is encoded SQL_ASCII, not UTF8" in refused.stderr
        assert "Traceback" not in refused.stderr
        conn = psycopg2.connect(f"{PG}/{ascii_db}")
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            assert cur.fetchone() == (0,)  # nothing was applied
        conn.close()
        health = _health_of(f"{PG}/{ascii_db}")
        assert health == (503, {"status": "error", "database": "encoded SQL_ASCII, not UTF8"})
    finally:
        with admin.cursor() as cur:
            for name in (fresh, ascii_db):
                cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _etl_migrate(url: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "ETL_DATABASE_URL": url}
    etl = Path(sys.executable).with_name("etl")
    return subprocess.run(
        [str(etl), "migrate"], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _health_of(url: str) -> tuple[int, dict]:
    import falcon.testing

    from service.app import create_app
    from service.domain.db import Database
    from service.domain.deps import Deps

    db = Database(url)
    try:
        answer = falcon.testing.TestClient(
            create_app(Deps(db=db, wake_run=lambda r, t: None))
        ).simulate_get("/health")
        return answer.status_code, answer.json
    finally:
        db.close()
