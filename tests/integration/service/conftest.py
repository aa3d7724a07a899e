"""Fixtures of the coordinator side's tests: a real gunicorn serving the API, and the demo's
topology (a coordinator and two executors with the demo's input)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from drills import ROOT, ApiClient, Stack, free_port
from service.config import Config
from service.run.gunicorn import gunicorn_argv
from tests.integration.testapp import API_WORKERS, seed_principals


@pytest.fixture
def gunicorn_log() -> Iterator[Path]:
    """The log of the `server` fixture's gunicorn: JSON lines, its access log included (each
    line names the pid of the worker that answered)."""
    log = Path(tempfile.mkstemp(prefix="gunicorn-", suffix=".log")[1])
    yield log
    log.unlink(missing_ok=True)


@pytest.fixture
def server(db_url: str, gunicorn_log: Path) -> Iterator[str]:
    """`etl api`'s gunicorn command with 3 workers on this test's database, logging each
    request to `gunicorn_log`; its base URL."""
    seed_principals(db_url)
    port = free_port()
    cfg = Config(database_url=db_url, api_bind=f"127.0.0.1:{port}", api_workers=API_WORKERS)
    env = {**os.environ, "ETL_DATABASE_URL": db_url, "ETL_LOG_LEVEL": "WARNING"}
    log = gunicorn_log
    argv = [*gunicorn_argv(cfg)[:-1], "--access-logfile", "-", gunicorn_argv(cfg)[-1]]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=os.getcwd()
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


@pytest.fixture
def demo_stack(stack_factory: Callable[..., Stack]) -> Stack:
    """A real topology (coordinator + two executors) with the demo's `customers.csv`."""
    s = stack_factory()
    shutil.copy(ROOT / "fixtures" / "customers.csv", s.data / "customers.csv")
    return s.start()
