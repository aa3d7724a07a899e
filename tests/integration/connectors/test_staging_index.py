"""The index of a table export's staging table on real PostgreSQL: none for a key-less export
while its batches are staged in their commits; the unique index on record_key from the
export's own write path's first write on (a re-staged batch is not doubled, an in-commit
insert of a batch it staged is refused); a primary key from creation with a key."""

from __future__ import annotations

import threading
import uuid

import psycopg2
import psycopg2.errors
import pytest

from connectors import TableExport
from connectors.table_export import STAGE_SCHEMA
from tests.integration.connectors.sandbox import (
    COLUMNS,
    count_published,
    run,
    sample_records,
    staged_export,
)

BATCH = 50
RECORDS = sample_records(6 * BATCH)


def batch(seq: int) -> list[dict]:
    return RECORDS[seq * BATCH : (seq + 1) * BATCH]


def stage_in_commit(conn, export: TableExport, seq: int, *, commit: bool = True) -> None:
    """Batch `seq` staged by the export's in-commit statement in a transaction of `conn`
    (as a batch's commit runs it), committed unless `commit` is False."""
    query, params = export.deferred_batch(seq, batch(seq), seq * BATCH + 1)
    with conn.cursor() as cur:
        cur.execute(query, params)
    if commit:
        conn.commit()


def staging_indexes(conn, export: TableExport) -> list[tuple]:
    """The staging table's indexes: (unique, primary, indexed columns)."""
    return run(
        conn,
        "SELECT i.indisunique, i.indisprimary,"
        " array(SELECT a.attname FROM unnest(i.indkey::int2[]) k(n)"
        "       JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n)"
        " FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
        " JOIN pg_namespace s ON s.oid = c.relnamespace"
        " WHERE s.nspname = %s AND c.relname = %s",
        (STAGE_SCHEMA, export.staging_name),
    )


def staged_rows(conn, export: TableExport) -> tuple[int, int]:
    """(rows, distinct record keys) in the staging table."""
    query = f"SELECT count(*), count(DISTINCT record_key) FROM {STAGE_SCHEMA}.{export.staging_name}"
    return run(conn, query)[0]


def test_keyless_staging_has_no_index_until_the_write_path_stages(conn, other) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id, key=None)
    assert staging_indexes(conn, export) == []
    for seq in (0, 1):
        stage_in_commit(other, export, seq)
    assert staging_indexes(conn, export) == []  # in-commit staging: no index
    assert staged_rows(conn, export) == (2 * BATCH, 2 * BATCH)
    # The write path (a batch refused in its commit, say): the unique index first, built
    # over the rows staged in commits.
    assert export.write_batch(2, batch(2), 2 * BATCH + 1) == []
    assert staging_indexes(conn, export) == [(True, False, ["record_key"])]
    assert export.write_batch(2, batch(2), 2 * BATCH + 1) == []  # re-staged: not doubled
    assert staged_rows(conn, export) == (3 * BATCH, 3 * BATCH)
    with pytest.raises(psycopg2.errors.UniqueViolation):  # StagingRefused in a commit
        stage_in_commit(other, export, 2)
    other.rollback()
    stage_in_commit(other, export, 3)  # in-commit staging goes on with the index
    assert staged_rows(conn, export) == (4 * BATCH, 4 * BATCH)
    assert export.check_staged(4, 4 * BATCH) is False
    assert export.publish(4, 4 * BATCH) == 4 * BATCH
    keys = run(conn, "SELECT record_key FROM sandbox.customers ORDER BY record_key::int")
    assert [k for (k,) in keys] == [str(i) for i in range(1, 4 * BATCH + 1)]


def test_a_fresh_keyless_staging_table_starts_without_an_index(conn) -> None:
    export = staged_export(conn, uuid.uuid4(), key=None)
    export.write_batch(0, batch(0), 1)
    assert staging_indexes(conn, export) == [(True, False, ["record_key"])]
    export.discard()  # the step starts over
    export.prepare()
    assert staging_indexes(conn, export) == []
    assert export.write_batch(0, batch(0), 1) == []
    assert export.write_batch(0, batch(0), 1) == []
    assert staged_rows(conn, export) == (BATCH, BATCH)


def test_write_path_waits_for_an_in_commit_insert_of_the_same_batch(conn, other) -> None:
    # A batch's commit staging batch 0 is still open when the write path stages the same
    # batch: the index waits for it, then the write finds its rows, as a primary key would.
    export = staged_export(conn, uuid.uuid4(), key=None)
    stage_in_commit(other, export, 0, commit=False)
    errors: list = []
    writer = threading.Thread(target=lambda: errors.append(export.write_batch(0, batch(0), 1)))
    writer.start()
    writer.join(0.5)
    assert writer.is_alive()  # blocked by the open commit
    other.commit()
    writer.join(10)
    assert errors == [[]]
    assert staged_rows(conn, export) == (BATCH, BATCH)
    assert staging_indexes(conn, export) == [(True, False, ["record_key"])]


@pytest.mark.parametrize("mode", ["append", "merge"])
def test_keyed_staging_keeps_its_primary_key(conn, other, mode) -> None:
    run_id = uuid.uuid4()
    export = TableExport(conn, f"keyed_{mode}", run_id, "to_table", COLUMNS, "id", mode)
    export.prepare()
    assert staging_indexes(conn, export) == [(True, True, ["record_key"])]
    stage_in_commit(other, export, 0)
    assert export.write_batch(1, batch(1), BATCH + 1) == []
    assert staging_indexes(conn, export) == [(True, True, ["record_key"])]
    # A key another batch staged is a duplicate: refused in a commit, a row error apart.
    with pytest.raises(psycopg2.errors.UniqueViolation):
        stage_in_commit(other, export, 0)
    other.rollback()
    errors = export.write_batch(2, batch(0)[:3], 2 * BATCH + 1)
    assert [e.column for e in errors] == ["id"] * 3
    assert export.publish(2, 2 * BATCH) == 2 * BATCH
    assert count_published(conn, run_id, f"keyed_{mode}") == 2 * BATCH
