"""Behind PgBouncer in transaction pooling, LISTEN hears nothing and says nothing: the check
every consuming process makes at start finds it, and an executor whose ETL_LISTEN_URL goes
through the pooler refuses to start, while one with a direct ETL_LISTEN_URL runs steps with
its state sessions and the broker's sends through the pooler (a real Debian pgbouncer)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors import ListenSilent, check_listen
from drills import Stack, free_port
from drills.pgbouncer import PgBouncer
from tests.integration.conftest import PG


@pytest.fixture
def bouncer() -> Iterator[PgBouncer]:
    with PgBouncer(PG) as running:
        yield running


def test_listen_is_heard_directly(db_url: str) -> None:
    check_listen(db_url)


def test_an_unreachable_database_is_left_to_the_reconnects(caplog) -> None:
    check_listen(f"postgresql://postgres@127.0.0.1:{free_port()}/etl")
    assert "LISTEN not checked" in caplog.text


def test_listen_through_transaction_pooling_is_found_silent(db_url: str, bouncer) -> None:
    pooled = bouncer.url(db_url.rsplit("/", 1)[1])
    with pytest.raises(ListenSilent, match="ETL_LISTEN_URL"):
        check_listen(pooled, wait_s=1.0)


def test_an_executor_listening_through_the_pooler_refuses_to_start(
    db_url: str, bouncer, tmp_path: Path
) -> None:
    pooled = bouncer.url(db_url.rsplit("/", 1)[1])
    stack = Stack(db_url, tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "service", "executor", "--name", "executor-b"],
        env={**stack.env, "ETL_DATABASE_URL": pooled, "ETL_LISTEN_URL": pooled},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "refuses to start" in out and "ETL_LISTEN_URL" in out, out


CHAIN = {
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "nums.csv", "columns": {"id": "int"}}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "nums.jsonl"}},
    ]
}  # fmt: skip


def test_a_chain_runs_with_state_and_sends_through_the_pooler(
    db_url: str, stack_factory, bouncer
) -> None:
    """ETL_DATABASE_URL through PgBouncer (the API, the batches' commits, the broker's
    sends), ETL_LISTEN_URL direct: a chain of three steps runs and exports every record."""
    database = db_url.rsplit("/", 1)[1]
    pooled = bouncer.url(database)
    stack = stack_factory(env={"ETL_DATABASE_URL": pooled, "ETL_SANDBOX_URL": pooled,
                               "ETL_LISTEN_URL": db_url})  # fmt: skip
    (stack.data / "nums.csv").write_text("id\n" + "".join(f"{i}\n" for i in range(1, 2001)))
    stack.start()
    try:
        run = stack.wait_run(stack.trigger(stack.create("nums", CHAIN))[1]["id"], timeout=120)
        assert run["status"] == "succeeded", run
        lines = (stack.exports / run["id"] / "nums.jsonl").read_text().splitlines()
        assert len(lines) == 2000
        assert f"login attempt: db={database}" in bouncer.log()
    finally:
        stack.stop()
