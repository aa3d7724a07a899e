"""A publish into an empty export table builds its primary key after the rows
(`connectors.empty_publish`), on real PostgreSQL: the same rows, key and constraint name as
the row-at-a-time insert; a table with rows, one a reader holds, or one whose key something
depends on keeps the row-at-a-time way; a refused publish leaves the key as it was."""

from __future__ import annotations

import uuid

import psycopg2
import psycopg2.extensions
import pytest

from connectors import StagingLost
from tests.integration.connectors.sandbox import (
    count_published,
    run,
    sample_records,
    staged_export,
)

KEY_INDEX = """
SELECT c.conname, c.conindid, pg_get_constraintdef(c.oid)
FROM pg_constraint c
WHERE c.conrelid = 'sandbox.customers'::regclass AND c.contype = 'p'
"""


def _staged(conn, n: int = 2_000, key: str | None = "id"):
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id, key=key)
    records = sample_records(n)
    for seq in range(0, n, 500):
        assert export.write_batch(seq // 500, records[seq : seq + 500], seq + 1) == []
    return run_id, export


def _key(conn) -> tuple[str, int, str]:
    (row,) = run(conn, KEY_INDEX)
    return row


@pytest.mark.parametrize("key", ["id", None])
def test_an_empty_table_gets_its_rows_then_its_key(conn, key) -> None:
    run_id, export = _staged(conn, key=key)
    name, index, definition = _key(conn)
    assert export.publish(rows=2_000) == 2_000
    assert count_published(conn, run_id) == 2_000
    rebuilt = _key(conn)
    assert rebuilt[0] == name and rebuilt[2] == definition
    assert rebuilt[1] != index  # a new index, built over the rows
    assert definition == "PRIMARY KEY (run_id, step_id, record_key)"
    keys = run(conn, "SELECT count(DISTINCT record_key) FROM sandbox.customers")[0][0]
    assert keys == 2_000

    # the table holds rows now: the next run's rows go into the same index
    second, export = _staged(conn, key=key)
    assert export.publish(rows=2_000) == 2_000
    assert _key(conn) == rebuilt
    assert count_published(conn, second) == 2_000


def test_a_reader_of_the_table_keeps_the_row_at_a_time_way(conn, other) -> None:
    run_id, export = _staged(conn)
    before = _key(conn)
    with other.cursor() as cur:  # a reader's open transaction on the empty table
        cur.execute("SELECT count(*) FROM sandbox.customers")
        assert cur.fetchone() == (0,)
        assert export.publish(rows=2_000) == 2_000  # not waiting for the reader
    other.rollback()
    assert _key(conn) == before
    assert count_published(other, run_id) == 2_000


@pytest.mark.parametrize(
    "depends",
    [
        "CREATE TABLE sandbox.refs (run_id uuid, step_id text, record_key text,"
        " FOREIGN KEY (run_id, step_id, record_key) REFERENCES sandbox.customers)",
        "ALTER INDEX sandbox.customers_pkey SET (fillfactor = 80)",
        "ALTER TABLE sandbox.customers CLUSTER ON customers_pkey",
        "ALTER TABLE sandbox.customers REPLICA IDENTITY USING INDEX customers_pkey",
        # the view's other column is grouped by the key alone: it needs the key to exist
        "CREATE VIEW sandbox.by_key AS SELECT run_id, step_id, record_key, name"
        " FROM sandbox.customers GROUP BY run_id, step_id, record_key",
    ],
    ids=["foreign-key", "index-options", "clustered", "replica-identity", "view"],
)
def test_a_key_something_depends_on_is_left_in_place(conn, depends) -> None:
    run_id, export = _staged(conn)
    run(conn, depends)
    before = _key(conn)
    assert export.publish(rows=2_000) == 2_000
    assert _key(conn) == before
    assert count_published(conn, run_id) == 2_000


def test_a_refused_publish_leaves_the_key_and_the_table_as_they_were(conn) -> None:
    run_id, export = _staged(conn)
    before = _key(conn)
    with pytest.raises(StagingLost):
        export.publish(rows=1_999)
    assert _key(conn) == before
    assert count_published(conn, run_id) == 0
    assert export.publish(rows=2_000) == 2_000


def test_a_role_that_may_only_insert_publishes_row_by_row(conn, other) -> None:
    """The export's role does not own the table (a table made by its owner, insert and
    select granted): it cannot drop the key, so its publish goes row by row, not fails."""
    suffix = uuid.uuid4().hex[:8]
    owner, writer = f"etl_owner_{suffix}", f"etl_writer_{suffix}"
    staged_export(conn, uuid.uuid4())  # creates sandbox.customers
    run(conn, f"CREATE ROLE {owner}; CREATE ROLE {writer}")
    try:
        run(
            conn,
            f"ALTER TABLE sandbox.customers OWNER TO {owner};"
            f" GRANT USAGE ON SCHEMA sandbox TO {writer};"
            f" GRANT USAGE, CREATE ON SCHEMA etl_stage TO {writer};"
            f" GRANT SELECT, INSERT ON sandbox.customers TO {writer}",
        )
        run(other, f"SET ROLE {writer}")
        run_id, export = _staged(other)
        before = _key(conn)
        assert export.publish(rows=2_000) == 2_000
        assert _key(conn) == before
        assert count_published(conn, run_id) == 2_000
    finally:
        other.rollback()
        run(other, "RESET ROLE")
        for role in (writer, owner):
            run(conn, f"DROP OWNED BY {role}; DROP ROLE {role}")


class _Statements(psycopg2.extensions.cursor):
    """A cursor that keeps the statements it sends in `sent` (of its class)."""

    sent: list[str] = []

    def execute(self, query, params=None):
        self.sent.append(self.mogrify(query, params).decode())
        return super().execute(query, params)


def test_a_table_with_rows_is_never_locked_for_the_rebuild(db_url, conn) -> None:
    """A publish into a table that holds rows asks for no exclusive lock at all (one taken
    and given back would still reach a standby's readers and queue this server's)."""
    _, first = _staged(conn)
    first.publish(rows=2_000)
    recording = psycopg2.connect(db_url, cursor_factory=_Statements)
    _Statements.sent = []
    try:
        run_id, export = _staged(recording)
        assert export.publish(rows=2_000) == 2_000
        assert not [s for s in _Statements.sent if "LOCK TABLE sandbox" in s.replace('"', "")]
        assert count_published(conn, run_id) == 2_000
    finally:
        recording.close()
