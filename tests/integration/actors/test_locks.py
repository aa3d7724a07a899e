"""Lock order of the advancer against an executor's commit, on real PostgreSQL.

The interleaving CI once hit: an executor's commit updates its step row twice (checkpoint,
then finish), and the second update's foreign-key check takes FOR KEY SHARE on the run row,
while the advancer holds the run row and waits for the step rows. With FOR UPDATE on the run
this was a deadlock (the executor's attempt failed); with FOR NO KEY UPDATE both go through."""

from __future__ import annotations

import threading
import time

import psycopg2
import pytest

from actors.sql import QUERIES
from tests.integration.actors.seeds import seed_running_run

pytestmark = pytest.mark.timeout(60)


def _wait_for_lock_wait(db_url: str, pid: int, timeout_s: float = 10) -> None:
    """Until backend `pid` waits for a row lock (or fail)."""
    watcher = psycopg2.connect(db_url)
    watcher.autocommit = True
    try:
        deadline = time.monotonic() + timeout_s
        with watcher.cursor() as cur:
            while time.monotonic() < deadline:
                cur.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,))
                if cur.fetchone()[0] == "Lock":
                    return
                time.sleep(0.02)
    finally:
        watcher.close()
    raise AssertionError("the advancer never waited for the executor's step row")


def test_advancer_locks_do_not_deadlock_with_an_executor_commit(db_url: str) -> None:
    executor = psycopg2.connect(db_url)
    advancer = psycopg2.connect(db_url)
    try:
        pid, rid = seed_running_run(executor)
        step = {"run_id": rid, "name": "read"}
        with executor.cursor() as ex:
            # 1. The executor's commit begins: its checkpoint update locks the step row.
            ex.execute("UPDATE step_runs SET records_in = 500 WHERE run_id = %(run_id)s", step)
            # 2. The advancer locks the pipeline and the run, then waits for the step rows.
            adv = advancer.cursor()
            adv.execute(QUERIES["lock_pipeline"], {"pipeline_id": pid})
            adv.execute(QUERIES["get_pipeline_run"], {"pipeline_id": pid, "status": "running"})
            assert adv.rowcount == 1
            waited: list[BaseException | list] = []

            def lock_steps() -> None:
                try:
                    adv.execute(QUERIES["lock_step_runs"], {"run_id": rid})
                    waited.append(adv.fetchall())
                except BaseException as exc:  # reported by the assertion below
                    waited.append(exc)

            t = threading.Thread(target=lock_steps)
            t.start()
            _wait_for_lock_wait(db_url, advancer.get_backend_pid())
            assert t.is_alive()
            # 3. The executor finishes the step: a second update of the same row, whose
            # foreign-key check locks the run row FOR KEY SHARE. No deadlock, no wait.
            ex.execute(QUERIES["finish_step"], {**step, "status": "succeeded", "error": None})
            assert ex.rowcount == 1
        executor.commit()
        t.join(10)
        assert not t.is_alive()
        assert not isinstance(waited[0], BaseException), waited[0]
        assert [r[1] for r in waited[0]] == ["succeeded"]
        advancer.commit()
    finally:
        executor.close()
        advancer.close()
