"""A batch's one transaction on real PostgreSQL (`actors.committer`): a table export's rows
staged in the same transaction as the checkpoint commit with it or not at all, whether the
batch is sent ahead on a session of its own (in flight while the caller goes on) or waits
on the caller's connection; a lost lease and refused rows are raised, and nothing of the
batch commits then."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import psycopg2
import pytest

from actors.committer import BatchCommitter, StagedRows, StepCommit
from actors.errors import LeaseLost, StagingRefused
from connectors import TableExport
from ddl import connect
from drills.pgbouncer import PgBouncer
from tests.integration.actors.seeds import seed_running_run
from tests.integration.conftest import PG

pytestmark = pytest.mark.timeout(60)
OWNER = "executor-t:boot"
COLUMNS = {"id": "int", "name": "string", "signup": "date"}


def _seed_attempt(conn) -> tuple[str, int]:
    """A running run of one step `to_table` with a live attempt leased to OWNER."""
    _, rid = seed_running_run(conn, "to_table")
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO attempts (run_id, step_name, number, executor, lease_owner,"
            " lease_expires_at, started_at) VALUES (%s, 'to_table', 1, %s, %s,"
            " now() + interval '1 minute', now()) RETURNING id",
            (rid, OWNER, OWNER),
        )
        attempt_id = cur.fetchone()[0]
    conn.commit()
    return rid, attempt_id


def _progress(records: int) -> dict:
    return {
        "name": "to_table", "checkpoint": {"n": records // 2}, "records_in": records,
        "records_out": records, "rejected": 0, "input_digest": "i", "output_digest": "o",
        "batches": 0, "columns": None, "row_errors": [], "output_kept": True,
    }  # fmt: skip


def _records(first: int, n: int) -> list[dict]:
    return [
        {"id": i, "name": f'n "{i}"\n, ü' if i % 3 else None, "signup": "2024-02-29"}
        for i in range(first, first + n)
    ]


def _state(conn, run_id: str, attempt_id: int) -> tuple[int, int]:
    """(records_in committed, batches_done) of the step and its attempt."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT s.records_in, a.batches_done FROM step_runs s JOIN attempts a"
            " ON a.run_id = s.run_id AND a.step_name = s.name"
            " WHERE s.run_id = %s AND a.id = %s",
            (run_id, attempt_id),
        )
        row = cur.fetchone()
    conn.rollback()
    return row


@pytest.fixture(params=["ahead", "waiting"])
def committer(request, db_url: str) -> Iterator[BatchCommitter]:
    """A committer with a session of its own (batches in flight), or one that waits."""
    ahead = request.param == "ahead"
    opened = BatchCommitter(
        (lambda: connect(db_url, "etl-test-commits", asynchronous=True)) if ahead else None
    )
    yield opened
    opened.settle()
    opened.close()


@pytest.fixture
def export(conn) -> Iterator[Callable[[str], TableExport]]:
    """The table export of a run's step, on a sandbox connection of its own."""
    other = psycopg2.connect(conn.dsn)
    yield lambda run_id: _prepared(other, run_id)
    other.close()


def _prepared(conn, run_id: str) -> TableExport:
    export = TableExport(conn, "committed", run_id, "to_table", COLUMNS, "id")
    export.prepare()
    return export


def _staged(export: TableExport, seq: int, records: list[dict], first: int) -> StagedRows:
    deferred = export.deferred_batch(seq, records, first)
    assert deferred is not None
    return StagedRows(*deferred)


def _commit(committer: BatchCommitter, conn, run_id, attempt_id, records, staged) -> bool:
    fence = {"owner": OWNER, "ttl_s": 60}
    steps = [StepCommit(attempt_id, _progress(records), 0, 0, None)]
    return committer.commit(conn, run_id, fence, steps, staged)


def test_staged_rows_commit_with_the_checkpoint_and_publish_as_written(
    committer, conn, export
) -> None:
    run_id, attempt_id = _seed_attempt(conn)
    staging = export(run_id)
    for seq in range(3):
        rows = _staged(staging, seq, _records(seq * 500 + 1, 500), seq * 500 + 1)
        assert _commit(committer, conn, run_id, attempt_id, (seq + 1) * 500, [rows]) is False
    assert committer.wait() is False
    assert _state(conn, run_id, attempt_id) == (1500, 3)
    staging.check_staged(3, 1500)
    assert staging.publish(3, 1500) == 1500
    with conn.cursor() as cur:
        cur.execute(
            "SELECT id, name, signup::text, record_key FROM sandbox.committed"
            " WHERE run_id = %s ORDER BY id",
            (run_id,),
        )
        got = cur.fetchall()
    expected = [(r["id"], r["name"], r["signup"], str(r["id"])) for r in _records(1, 1500)]
    assert got == expected


def test_a_lost_lease_commits_neither_the_checkpoint_nor_the_staged_rows(
    committer, conn, export
) -> None:
    run_id, attempt_id = _seed_attempt(conn)
    staging = export(run_id)
    _commit(committer, conn, run_id, attempt_id, 500, [_staged(staging, 0, _records(1, 500), 1)])
    committer.wait()
    with conn.cursor() as cur:  # taken over by another executor
        cur.execute("UPDATE attempts SET lease_owner = 'other' WHERE id = %s", (attempt_id,))
    conn.commit()
    rows = _staged(staging, 1, _records(501, 500), 501)
    with pytest.raises(LeaseLost, match="no longer held by executor-t:boot"):
        _commit(committer, conn, run_id, attempt_id, 1000, [rows])
        committer.wait()
    conn.rollback()
    assert _state(conn, run_id, attempt_id) == (500, 1)
    staging.check_staged(1, 500)  # batch 1's rows did not stay behind
    with conn.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM etl_stage.{staging.staging_name}")
        assert cur.fetchone()[0] == 500


def test_rows_refused_by_staging_roll_the_whole_batch_back(committer, conn, export) -> None:
    run_id, attempt_id = _seed_attempt(conn)
    staging = export(run_id)
    _commit(committer, conn, run_id, attempt_id, 500, [_staged(staging, 0, _records(1, 500), 1)])
    again = _records(400, 500)  # ids 400..899: 400..500 were staged by batch 0
    with pytest.raises(StagingRefused, match="duplicate key"):
        _commit(committer, conn, run_id, attempt_id, 1000, [_staged(staging, 1, again, 501)])
        committer.wait()
    conn.rollback()
    assert _state(conn, run_id, attempt_id) == (500, 1)
    # the per-batch path stages what it can and reports the keys of batch 0
    errors = staging.write_batch(1, again, 501)
    assert [e.record for e in errors] == list(range(501, 602))
    too_big = [{"id": 2**63, "name": "x", "signup": "2024-01-01"}]  # beyond bigint
    with pytest.raises(StagingRefused, match="out of range"):
        _commit(committer, conn, run_id, attempt_id, 1001, [_staged(staging, 2, too_big, 1001)])
        committer.wait()
    conn.rollback()
    assert _state(conn, run_id, attempt_id) == (500, 1)


def test_a_batch_json_cannot_carry_goes_by_the_per_batch_path(conn) -> None:
    staging = _prepared(conn, str(uuid.uuid4()))
    nul = [{"id": 1, "name": "a\x00b", "signup": None}]
    surrogate = [{"id": 1, "name": "\ud800", "signup": None}]
    repeated = [{"id": 1, "name": "a", "signup": None}, {"id": 1, "name": "b", "signup": None}]
    null_key = [{"id": None, "name": "a", "signup": None}]
    huge = [{"id": 2**64, "name": "a", "signup": None}]
    for records in (nul, surrogate, repeated, null_key, huge, []):
        assert staging.deferred_batch(0, records, 1) is None, records


def test_staged_a_column_at_a_time_or_as_json_the_rows_are_the_records(
    committer, conn, export
) -> None:
    """The column texts (`connectors.commit_staging`) and the JSON fallback (a value holding
    a separator, one record alone) stage exactly the records: nulls, empty text, white
    space, backslashes, braces, `null` as text, dates, ints at the ends of bigint."""
    run_id, attempt_id = _seed_attempt(conn)
    staging = export(run_id)
    names = ["", None, "null", "NULL", "a\\b", '{"x", y}', " \t\n é ", "\u2003", "a\x1fb", "\x1e"]
    batches = [
        [
            {"id": i, "name": name, "signup": None if i % 2 else "2024-02-29"}
            for i, name in zip(range(1, 9), names, strict=False)
        ],
        [{"id": 2**63 - 1, "name": names[i % 8], "signup": "0001-01-01"} for i in range(1)],
        [{"id": -(2**63) + i, "name": n, "signup": None} for i, n in enumerate(names)],
    ]
    expected, first = [], 1
    for seq, records in enumerate(batches):
        rows = _staged(staging, seq, records, first)
        assert ("json_to_recordset" in rows.query) == (seq > 0)  # a separator, one record
        _commit(committer, conn, run_id, attempt_id, first + len(records) - 1, [rows])
        expected += [(r["id"], r["name"], r["signup"], str(r["id"])) for r in records]
        first += len(records)
    assert committer.wait() is False
    assert staging.publish(3, len(expected)) == len(expected)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT id, name, signup::text, record_key FROM sandbox.committed"
            " WHERE run_id = %s ORDER BY id",
            (run_id,),
        )
        assert cur.fetchall() == sorted(expected, key=lambda row: row[0])


@pytest.mark.parametrize("ahead", [True, False], ids=["ahead", "waiting"])
def test_a_batch_behind_a_transaction_pooler_commits_without_its_prepared_statement(
    db_url: str, conn, ahead: bool
) -> None:
    """Behind PgBouncer in transaction pooling, a batch's query can reach a server session
    that never prepared `commit_batch` (another client holds the one that did): it commits
    all the same, with the statement written out, and so does the next one."""
    pooled_db = db_url.rsplit("/", 1)[1]
    run_id, attempt_id = _seed_attempt(conn)
    with PgBouncer(PG) as bouncer:
        pooled = bouncer.url(pooled_db)
        state = connect(pooled, "etl-test-state")
        opened = BatchCommitter(
            (lambda: connect(pooled, "etl-test-commits", asynchronous=True)) if ahead else None
        )
        holder = psycopg2.connect(pooled)
        try:
            assert _commit(opened, state, run_id, attempt_id, 2, []) is False
            assert opened.wait() is False
            with holder.cursor() as cur:  # takes the server session the statement is on
                cur.execute("SELECT 1")
            fence = {"owner": OWNER, "ttl_s": 60}
            for seq, records in enumerate((4, 6)):
                kept = [StepCommit(attempt_id, _progress(records), seq, 2, b'[["a"],["b"]]')]
                assert opened.commit(state, run_id, fence, kept) is False
                assert opened.wait() is False
            assert opened._plain  # the batches did meet a session without the statement
        finally:
            holder.close()
            opened.settle()
            opened.close()
            state.close()
    assert _state(conn, run_id, attempt_id) == (6, 3)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT seq, records FROM step_batches WHERE run_id = %s ORDER BY seq", (run_id,)
        )
        assert cur.fetchall() == [(0, 2), (1, 2)]
    conn.rollback()
