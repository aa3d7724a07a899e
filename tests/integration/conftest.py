"""Integration fixtures: a template database built once from `ddl/`, and a fresh copy of it
for every test (`CREATE DATABASE ... TEMPLATE`); the factories of in-process apps
(`app_factory`, `api`) and of real topologies (`stack_factory`, `stack`). A missing
PostgreSQL fails the run."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import falcon.testing
import psycopg2
import pytest
from psycopg2 import sql

import ddl
from drills import Stack
from service.app import create_app
from service.config import Config
from service.console import ConsoleSettings
from service.domain.authfailures import Penalties
from service.domain.db import Database
from service.domain.deps import Deps
from service.domain.processmetrics import RequestTotals
from tests.integration.testapp import NOW, Api, seed_principals

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


def _recorded(
    sleeps: list[float], sleep: Callable[[float], None] | None
) -> Callable[[float], None]:
    """A penalty sleep that records its delay in `sleeps`, then calls `sleep` (if any)."""

    def record(delay_s: float) -> None:
        sleeps.append(delay_s)
        if sleep is not None:
            sleep(delay_s)

    return record


@pytest.fixture
def app_factory(db_url: str) -> Iterator[Callable[..., Api]]:
    """Builds in-process apps (`create_app`, falcon's TestClient): on this test's database
    with three principals (`seed`), a fixed clock, a recording `wake_run`, a recording
    `sleep` (the delays of failed authentications, never waited unless a `sleep` is given),
    and the console settings, config, id generator, tracer and request totals given; or on
    `db` (a database that is down, say)."""
    opened: list[Database] = []
    seeded: list[bool] = []

    def make(
        *,
        db: Database | None = None,
        console: ConsoleSettings | None = None,
        config: Config | None = None,
        seed: bool = True,
        new_id: Callable[[], uuid.UUID] = uuid.uuid4,
        tracer: Any = None,
        sleep: Callable[[float], None] | None = None,
        metrics_max_age_s: float = 0.0,  # every scrape reads the database (tests see changes)
        request_totals: RequestTotals | None = None,
    ) -> Api:
        if db is None:
            if seed and not seeded:
                seed_principals(db_url)
                seeded.append(True)
            db = Database(db_url)
            opened.append(db)
        wakes: list[tuple[str, str]] = []
        sleeps: list[float] = []
        deps = Deps(
            db=db,
            wake_run=lambda run_id, trace_id: wakes.append((run_id, trace_id)),
            now=lambda: NOW,
            new_id=new_id,
            penalties=Penalties(_recorded(sleeps, sleep)),
            metrics_max_age_s=metrics_max_age_s,
            **({"request_totals": request_totals} if request_totals is not None else {}),
            **({"config": config} if config is not None else {}),
            **({"tracer": tracer} if tracer is not None else {}),
        )
        return Api(falcon.testing.TestClient(create_app(deps, console)), db_url, wakes, sleeps)

    yield make
    for db in opened:
        db.close()


@pytest.fixture
def api(app_factory: Callable[..., Api]) -> Api:
    """The app on a fresh database with three principals, a fixed clock and a recording
    `wake_run`."""
    return app_factory()


@pytest.fixture
def stack_factory(db_url: str, tmp_path: Path) -> Iterator[Callable[..., Stack]]:
    """Builds real topologies (`drills.Stack`, not started) on this test's database: with
    `env` and the data `files` given (name -> text), under `tmp_path` (the first) or a folder
    of its own there; every one is stopped at the end."""
    made: list[Stack] = []

    def make(env: dict[str, str] | None = None, files: dict | None = None, **kw: Any) -> Stack:
        where = tmp_path if not made else tmp_path / f"stack-{len(made)}"
        s = Stack(db_url, where, env=env, **kw)
        for name, text in (files or {}).items():
            (s.data / name).write_text(text() if callable(text) else text)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


@pytest.fixture
def stack(stack_factory: Callable[..., Stack], request: pytest.FixtureRequest) -> Stack:
    """A topology (not started) with the test module's `STACK_ENV` and `STACK_FILES` (name ->
    text, or a function making it), and the env of an indirect parametrization
    (`@pytest.mark.parametrize("stack", [ENV], indirect=True)`) on top."""
    env = {**getattr(request.module, "STACK_ENV", {}), **(getattr(request, "param", None) or {})}
    return stack_factory(env=env, files=getattr(request.module, "STACK_FILES", {}))
