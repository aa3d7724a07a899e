"""Behind PgBouncer in transaction pooling, LISTEN hears nothing and says nothing: the check
every consuming process makes at start finds it, and an executor whose ETL_LISTEN_URL goes
through the pooler refuses to start, while one with a direct ETL_LISTEN_URL runs steps with
its state sessions and the broker's sends through the pooler, and the API admits a
30-trigger burst exactly through it (a real Debian pgbouncer)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors import ListenSilent, check_listen
from dag import GLOBAL_ACTIVE_LIMIT, PIPELINE_ACTIVE_LIMIT
from drills import ApiClient, Stack, concurrently, free_port, run_sql
from drills.pgbouncer import PgBouncer
from service.config import Config
from service.run.gunicorn import gunicorn_argv
from tests.integration.conftest import PG
from tests.integration.testapp import API_WORKERS, plan_copy, request_json, seed_principals


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
        run = stack.wait_run(stack.trigger(stack.create("nums", CHAIN))[1]["id"], timeout=300)
        assert run["status"] == "succeeded", run
        lines = (stack.exports / run["id"] / "nums.jsonl").read_text().splitlines()
        assert len(lines) == 2000
        assert f"login attempt: db={database}" in bouncer.log(tail=None)
    finally:
        stack.stop()


def test_the_thirty_trigger_burst_through_the_pooler(db_url: str, bouncer, tmp_path) -> None:
    """`etl api`'s gunicorn (3 workers) with ETL_DATABASE_URL through PgBouncer: 30
    simultaneous triggers over 8 pipelines admit exactly 20 runs, at most 4 per pipeline, and
    the database agrees (admission's advisory lock is a transaction's)."""
    seed_principals(db_url)
    pooled = bouncer.url(db_url.rsplit("/", 1)[1])
    port = free_port()
    cfg = Config(database_url=pooled, api_bind=f"127.0.0.1:{port}", api_workers=API_WORKERS)
    env = {**os.environ, "ETL_DATABASE_URL": pooled, "ETL_LOG_LEVEL": "WARNING"}
    with (tmp_path / "gunicorn.log").open("wb") as out:
        proc = subprocess.Popen(gunicorn_argv(cfg), env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        ApiClient(base).wait_healthy(timeout=30)
        api = f"{base}/api/v1"
        pipelines = [
            request_json(api, "POST", "/pipelines", {"name": f"c{i}", "plan": plan_copy()})[1]["id"]
            for i in range(8)
        ]
        spread = [8, 6, 4, 4, 2, 2, 2, 2]
        pairs = enumerate(zip(pipelines, spread, strict=True))
        calls = [(pid, f"burst-{n}-{k}") for n, (pid, count) in pairs for k in range(count)]
        answers = concurrently([
            lambda c=c: request_json(api, "POST", f"/pipelines/{c[0]}/runs", {"trigger_key": c[1]})
            for c in calls
        ])  # fmt: skip
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    created = Counter(body["pipeline_id"] for status, body in answers if status == 201)
    assert sum(created.values()) == GLOBAL_ACTIVE_LIMIT
    assert max(created.values()) <= PIPELINE_ACTIVE_LIMIT
    rows = run_sql(db_url, "SELECT status, count(*) FROM runs GROUP BY status")
    assert dict(rows) == {"queued": GLOBAL_ACTIVE_LIMIT, "skipped": 10}
    assert "login attempt" in bouncer.log(tail=None)
