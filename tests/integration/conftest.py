"""Integration fixtures: a template database built once from `ddl/`, and a fresh copy of it
for every test (`CREATE DATABASE ... TEMPLATE`). A missing PostgreSQL fails the run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import falcon.testing
import psycopg2
import pytest
from psycopg2 import sql

import ddl
from drills import ROOT, ApiClient, Stack, free_port
from service.app import create_app
from service.config import Config
from service.domain.db import Database
from service.domain.deps import Deps
from service.run.gunicorn import gunicorn_argv
from tests.integration.testapp import API_WORKERS, NOW, Api, seed_principals

PG = os.environ.get("ETL_TEST_PG", "postgresql://postgres@127.0.0.1:5432")


def _admin():
    try:
        conn = psycopg2.connect(f"{PG}/postgres", connect_timeout=5)
    except psycopg2.OperationalError as exc:  # a missing PostgreSQL fails the run, never skips
        pytest.fail(f"PostgreSQL is required for integration tests ({PG}): {exc}")
    conn.autocommit = True
    return conn


def _drop(cur, name: str) -> None:
    cur.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def template_db() -> Iterator[str]:
    """A database with every migration applied, used as the template of per-test databases."""
    name = f"etl_tpl_{os.getpid()}"
    conn = _admin()
    with conn.cursor() as cur:
        _drop(cur, name)
    ddl.migrate(f"{PG}/{name}")
    yield name
    with conn.cursor() as cur:
        _drop(cur, name)
    conn.close()


@pytest.fixture
def db_url(template_db: str) -> Iterator[str]:
    """The URL of a fresh, fully migrated database of this test's own."""
    name = f"etl_t_{uuid.uuid4().hex[:12]}"
    conn = _admin()
    with conn.cursor() as cur:
        cur.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_db)
            )
        )
    yield f"{PG}/{name}"
    with conn.cursor() as cur:
        _drop(cur, name)
    conn.close()


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg2.extensions.connection]:
    """A connection to this test's database."""
    c = psycopg2.connect(db_url)
    yield c
    c.close()


@pytest.fixture
def api(db_url: str) -> Iterator[Api]:
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


@pytest.fixture
def server(db_url: str) -> Iterator[str]:
    """`etl api`'s gunicorn command with 3 workers on this test's database; its base URL."""
    seed_principals(db_url)
    port = free_port()
    cfg = Config(database_url=db_url, api_bind=f"127.0.0.1:{port}", api_workers=API_WORKERS)
    env = {**os.environ, "ETL_DATABASE_URL": db_url, "ETL_LOG_LEVEL": "WARNING"}
    log = Path(tempfile.mkstemp(prefix="gunicorn-", suffix=".log")[1])
    with log.open("wb") as out:
        proc = subprocess.Popen(
            gunicorn_argv(cfg), env=env, stdout=out, stderr=subprocess.STDOUT, cwd=os.getcwd()
        )
    base = f"http://127.0.0.1:{port}"

    def alive() -> None:
        if proc.poll() is not None:
            pytest.fail(f"gunicorn did not start: {log.read_text()[-3000:]}")

    try:
        ApiClient(base).wait_healthy(timeout=30, alive=alive)
        yield f"{base}/api/v1"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.unlink(missing_ok=True)


@pytest.fixture
def demo_stack(db_url: str, tmp_path: Path) -> Iterator[Stack]:
    """A real topology (coordinator + two executors) with the demo's `customers.csv`."""
    s = Stack(db_url, tmp_path)
    shutil.copy(ROOT / "fixtures" / "customers.csv", s.data / "customers.csv")
    try:
        yield s.start()
    finally:
        s.stop()
