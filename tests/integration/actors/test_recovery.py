"""Recovery from faults outside the executor: PostgreSQL restarted (a private cluster, never
the shared server), an executor's sessions terminated, a cancel while no executor is there
to claim. The step goes on at once from its checkpoint (no lease waited out), and a run
nobody will ever claim ends canceled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest

from ddl import connect, connection_lost
from drills import Stack, run_sql
from drills.pgcluster import PrivateCluster
from tests.integration.actors.nums import PLAN, TABLE_PLAN, N, table_rows, write_nums

# The production lease: a step that waited for it to run out would show `lease_expired`.
SLOW_EXPORT = {"ETL_FAULT": "slow_batches:step=out:ms=250", "ETL_LEASE_TTL_S": "30"}


def _committed(stack: Stack, run_id: str) -> tuple[str, int] | None:
    """(executor, batches committed) of the export's live attempt, once it has claimed."""
    rows = stack.sql(
        "SELECT executor, batches_done FROM attempts"
        " WHERE run_id = %s AND step_name = 'out' AND outcome IS NULL AND executor IS NOT NULL",
        run_id,
    )
    return rows[0] if rows else None


def _check_run(stack: Stack, run: dict) -> dict:
    assert run["status"] == "succeeded", run
    out = next(s for s in run["steps"] if s["name"] == "out")
    lines = (stack.exports / run["id"] / "nums.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == list(range(1, N + 1))
    return out


@pytest.fixture
def cluster() -> Iterator[PrivateCluster]:
    c = PrivateCluster()
    c.start()
    yield c
    c.destroy()


def _run_on(cluster: PrivateCluster, tmp_path: Path, plan: dict) -> tuple[Stack, str]:
    """A stack on the private cluster running `plan`, once its export committed 3 batches:
    (stack, run id). The caller stops the stack."""
    stack = Stack(f"{cluster.url}/etl", tmp_path, env=SLOW_EXPORT)
    try:
        stack.etl("migrate")
        write_nums(stack)
        stack.start()
        run_id = stack.trigger(stack.create("nums", plan))[1]["id"]
        stack.wait_for(lambda: (a := _committed(stack, run_id)) and a[1] >= 3, what="3 batches")
    except BaseException:
        stack.stop()
        raise
    return stack, run_id


def test_a_restart_of_postgresql_does_not_wait_out_the_lease(
    cluster: PrivateCluster, tmp_path: Path
) -> None:
    stack, run_id = _run_on(cluster, tmp_path, PLAN)
    try:
        cluster.restart(down_s=1)
        run = stack.wait_run(run_id, timeout=120)
        out = _check_run(stack, run)
        # the executor took its own attempt back once PostgreSQL answered again
        assert [a["outcome"] for a in out["attempts"]] == ["succeeded"], out["attempts"]
    finally:
        stack.stop()


def test_a_crash_of_postgresql_takes_back_unflushed_batches_and_loses_nothing(
    cluster: PrivateCluster, tmp_path: Path
) -> None:
    # Batches commit without waiting for their WAL flush (docs/decisions.md, "Batches
    # committed ahead"): an immediate stop (a crash: no shutdown checkpoint, recovery from
    # the WAL) may take the last of them back, with their staged rows; the step goes on from
    # the checkpoint that survived and exports every record once.
    stack, run_id = _run_on(cluster, tmp_path, TABLE_PLAN)
    try:
        cluster.stop(mode="immediate")
        cluster.start()
        run = stack.wait_run(run_id, timeout=180)
        _check_run(stack, run)
        assert table_rows(stack, run_id) == (N, N, 1, N)
        done = stack.sql(
            "SELECT sum(batches_done) FROM attempts WHERE run_id = %s AND step_name = 'to_table'",
            run_id,
        )[0][0]
        assert done == N // 500  # a batch taken back by the crash counts once, when redone
    finally:
        stack.stop()


def test_terminated_sessions_of_an_executor_are_ridden_out_quietly(stack_factory) -> None:
    stack = stack_factory(env=SLOW_EXPORT)
    write_nums(stack)
    stack.start()
    try:
        run_id = stack.trigger(stack.create("nums", PLAN))[1]["id"]
        executor, _ = stack.wait_for(
            lambda: (a := _committed(stack, run_id)) and a[1] >= 3 and a, what="3 batches"
        )
        name = executor.split(":")[0]
        cut = stack.sql(
            "SELECT application_name FROM pg_stat_activity, pg_terminate_backend(pid)"
            " WHERE datname = current_database() AND application_name LIKE %s",
            f"etl-{name}%",
        )
        # the step's session, its heartbeat's and the broker's (consumer and pool)
        assert {f"etl-{name}", f"etl-{name}-broker"} <= {r[0] for r in cut}, cut
        run = stack.wait_run(run_id, timeout=120)
        out = _check_run(stack, run)
        assert [a["outcome"] for a in out["attempts"]] == ["succeeded"], out["attempts"]
        assert stack.procs[name].poll() is None  # it did not die over it
        log = stack.logs[name].read_text()
        assert "CRITICAL" not in log and "Traceback" not in log, log[-3000:]
    finally:
        stack.stop()


def test_cancel_ends_a_run_whose_step_no_executor_claimed(stack_factory) -> None:
    stack = stack_factory()
    write_nums(stack)
    stack.start(executors=())  # the executors are down
    try:
        pipeline = stack.create("nums", PLAN)
        first = stack.trigger(pipeline)[1]["id"]
        second = stack.trigger(pipeline)[1]["id"]
        unclaimed = "SELECT count(*) FROM attempts WHERE run_id = %s AND lease_owner IS NULL"
        stack.wait_for(lambda: stack.sql(unclaimed, first)[0][0] == 1, what="an open attempt")
        assert stack.req("POST", f"/runs/{first}/cancel")[0] == 202
        run = stack.wait_run(first, timeout=60)
        assert run["status"] == "canceled"
        read = next(s for s in run["steps"] if s["name"] == "read")
        assert (read["status"], [a["outcome"] for a in read["attempts"]]) == (
            "canceled",
            ["canceled"],
        )
        # the queue moves: the next run starts, and runs once an executor comes up
        stack.wait_run(second, timeout=60, until=("running",))
        stack.spawn("executor-1", "executor", "--name", "executor-1")
        assert stack.wait_run(second, timeout=120)["status"] == "succeeded"
        assert stack.run(first)["status"] == "canceled"  # its late wake-up claimed nothing
    finally:
        stack.stop()


def test_connection_lost_tells_a_gone_session_from_a_failed_statement(db_url: str) -> None:
    conn = connect(db_url, "etl-test", statement_timeout_s=0.1)
    try:
        with pytest.raises(psycopg2.Error) as timed_out:
            conn.cursor().execute("SELECT pg_sleep(5)")
        assert not connection_lost(timed_out.value)  # the session lives on
        conn.rollback()
        with pytest.raises(psycopg2.Error) as bad:
            conn.cursor().execute("SELECT 1/0")
        assert not connection_lost(bad.value)
        conn.rollback()
        pid = conn.get_backend_pid()
        assert run_sql(db_url, "SELECT pg_terminate_backend(%s)", pid) == [(True,)]
        with pytest.raises(psycopg2.Error) as gone:
            conn.cursor().execute("SELECT 1")
        assert connection_lost(gone.value)
        with pytest.raises(psycopg2.Error) as closed:
            conn.cursor().execute("SELECT 1")
        assert connection_lost(closed.value)
    finally:
        conn.close()
