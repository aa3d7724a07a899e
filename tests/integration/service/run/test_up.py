"""`etl up` as a new user starts it: on a database nobody migrated, with the API's port
taken, from another directory. It stops at once with one line naming the fix, or says
which directories it uses; never a loop of tracebacks and restarts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from drills import free_port
from tests.integration.conftest import PG

ROOT = Path(__file__).resolve().parents[4]


def environment(db_url: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETL_")}
    bind = f"127.0.0.1:{free_port()}"
    return {**env, "ETL_DATABASE_URL": db_url, "ETL_API_BIND": bind, **more}


def etl(env: dict[str, str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def listening() -> Iterator[int]:
    """A port something listens on (another `etl up`, as far as a new one can tell)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def test_up_on_a_database_not_migrated_stops_at_once_naming_etl_migrate() -> None:
    env = environment(f"{PG}/etl_never_{uuid.uuid4().hex[:8]}")  # no such database
    done = etl(env, "up")
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.splitlines()
    assert line.startswith("etl up: the database at postgresql://"), line
    assert "is not migrated (" in line and line.endswith("run `etl migrate` first")
    assert "started coordinator" not in done.stdout  # nothing was started
    for args in (["coordinator"], ["executor", "--name", "x"]):
        alone = etl(env, *args)  # as compose or a service manager starts them
        assert alone.returncode == 78, (args, alone.stderr[-2000:])
        assert alone.stderr.strip().endswith("run `etl migrate` first")
        assert "Traceback" not in alone.stderr


def test_up_with_the_database_down_stops_at_once_naming_etl_database_url() -> None:
    env = environment(f"postgresql://postgres@127.0.0.1:{free_port()}/etl")
    done = etl(env, "up")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("etl up: cannot connect to the database at postgresql://")
    assert line.endswith("start PostgreSQL, or point ETL_DATABASE_URL at it")


def test_up_with_the_api_port_taken_stops_at_once_naming_etl_api_bind(
    db_url: str, listening: int
) -> None:
    env = environment(db_url, ETL_API_BIND=f"127.0.0.1:{listening}")
    done = etl(env, "up")
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"etl up: the API address 127.0.0.1:{listening} is already in use")
    assert "set ETL_API_BIND" in line and "started coordinator" not in done.stdout


def test_up_says_which_directories_it_uses_and_that_a_missing_data_directory_fails(
    db_url: str, tmp_path: Path
) -> None:
    env = environment(db_url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "up"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    assert lines[0].split(" | ")[1] == (
        f"data directory (ingest reads here): {tmp_path.resolve() / 'fixtures'} (ETL_DATA_DIR)"
        " - does not exist: every file ingest will fail; set ETL_DATA_DIR\n"
    )
    assert f"export directory: {tmp_path.resolve() / 'var' / 'exports'}" in lines[1]
    assert f"reject directory: {tmp_path.resolve() / 'var' / 'rejects'}" in lines[2]
    assert proc.returncode == 0
