"""A PostgreSQL failover under a run: a primary and its streaming replica of the test's own
(`drills.pgfailover`), reached through one multi-host URL with
`target_session_attrs=read-write`. The replica is stopped mid-export, so the batches the
primary commits after that never reach it (what asynchronous replication can lose); the
primary is then SIGKILLed and the replica promoted. The processes reconnect on their own and
redo the lost batches from the replica's checkpoint, each exactly once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from drills import Stack, run_sql
from drills.pgfailover import FailoverPair
from tests.integration.actors.nums import TABLE_PLAN, N, table_rows, write_nums

SLOW = {
    "ETL_FAULT": "slow_batches:step=out:ms=250,slow_batches:step=to_table:ms=250",
    "ETL_LEASE_TTL_S": "30",
}
_BATCHES = (
    "SELECT coalesce(sum(batches_done), 0) FROM attempts WHERE run_id = %s"
    " AND step_name IN ('to_table', 'out')"
)


@pytest.fixture
def pair() -> Iterator[FailoverPair]:
    p = FailoverPair()
    p.start()
    yield p
    p.destroy()


def _batches(url: str, run_id: str) -> int:
    return int(run_sql(url, _BATCHES, run_id)[0][0])


def test_batches_the_replica_never_received_are_redone_once_after_promotion(
    pair: FailoverPair, tmp_path: Path
) -> None:
    stack = Stack(f"{pair.url}/etl{pair.url_query}", tmp_path, env=SLOW)
    primary = f"{pair.primary.url}/etl"
    try:
        stack.etl("migrate")
        write_nums(stack)
        stack.start()
        run_id = stack.trigger(stack.create("nums", TABLE_PLAN))[1]["id"]
        stack.wait_for(lambda: _batches(primary, run_id) >= 4, what="4 export batches")
        pair.pause_replication()
        paused = _batches(primary, run_id)
        stack.wait_for(lambda: _batches(primary, run_id) >= paused + 4, what="4 more batches")
        pair.kill_primary()
        pair.promote()
        replica = f"{pair.replica.url}/etl"
        # committed on the primary, acknowledged, and gone: the replica's checkpoint is older
        assert _batches(replica, run_id) <= paused
        run = stack.wait_run(run_id, timeout=180)
        assert run["status"] == "succeeded", run
        lines = (stack.exports / run_id / "nums.jsonl").read_text().splitlines()
        assert sorted(json.loads(x)["id"] for x in lines) == list(range(1, N + 1))
        assert table_rows(stack, run_id) == (N, N, 1, N)
        per_step = stack.sql(
            "SELECT step_name, sum(batches_done) FROM attempts WHERE run_id = %s"
            " AND step_name IN ('to_table', 'out') GROUP BY step_name ORDER BY step_name",
            run_id,
        )
        assert per_step == [("out", N // 500), ("to_table", N // 500)]  # each batch once
        assert stack.sql("SELECT count(*) FROM attempts WHERE outcome IS NULL") == [(0,)]
    finally:
        stack.stop()
