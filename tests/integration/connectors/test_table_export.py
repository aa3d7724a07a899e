"""The staged table export on real PostgreSQL: invisible until publish, exactly once, the
target table fitted, and the committed counters the truth of a publish."""

from __future__ import annotations

import threading
import uuid

import pytest

from connectors import (
    StagingLost,
    TableConflict,
    TableExport,
    TableRefused,
)
from connectors.published_rows import count_run_rows, withdraw_run_rows
from connectors.sql import QUERIES
from connectors.table_export import STAGE_SCHEMA
from dag.errors import ConfigValueError, InputDataError
from tests.integration.connectors.sandbox import (
    COLUMNS,
    count_published,
    run,
    sample_records,
    staged_export,
    staging_tables,
)

# ---------------------------------------------------------------- export


def test_export_in_batches_then_publish_exactly_once(conn) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    records = sample_records(10_000)
    for seq in range(20):
        assert export.write_batch(seq, records[seq * 500 : (seq + 1) * 500], seq * 500 + 1) == []
    assert count_published(conn, run_id) == 0
    assert export.publish() == 10_000
    rows = run(
        conn,
        "SELECT id, name, signup::text, step_id, record_key FROM sandbox.customers "
        "WHERE run_id = %s ORDER BY id",
        (str(run_id),),
    )
    assert rows == [(r["id"], r["name"], r["signup"], "to_table", str(r["id"])) for r in records]
    assert staging_tables(conn) == []


def test_batch_rewritten_after_a_crash_is_absorbed(conn, other) -> None:
    run_id = uuid.uuid4()
    records = sample_records(2_000)
    first = staged_export(conn, run_id)
    for seq in range(3):
        first.write_batch(seq, records[seq * 500 : (seq + 1) * 500], seq * 500 + 1)
    # Crash after batch 2 was exported, before its checkpoint: a new attempt on another
    # connection resumes at batch 2 (prepare again, no discard) and writes it again.
    second = staged_export(other, run_id)
    for seq in range(2, 4):
        assert second.write_batch(seq, records[seq * 500 : (seq + 1) * 500], seq * 500 + 1) == []
    assert second.publish() == 2_000
    assert count_published(conn, run_id) == 2_000
    keys = run(conn, "SELECT count(DISTINCT record_key) FROM sandbox.customers")[0][0]
    assert keys == 2_000


def test_concurrent_reader_sees_nothing_then_everything(conn, other) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    records = sample_records(10_000)
    for seq in range(20):
        export.write_batch(seq, records[seq * 500 : (seq + 1) * 500], seq * 500 + 1)
        assert count_published(other, run_id) == 0
    seen: set[int] = set()
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            seen.add(count_published(other, run_id))

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        export.publish()
    finally:
        stop.set()
        reader.join()
    assert seen <= {0, 10_000}
    assert count_published(other, run_id) == 10_000


def test_two_runs_give_two_sets_of_rows(conn) -> None:
    run_a, run_b = uuid.uuid4(), uuid.uuid4()
    for run_id in (run_a, run_b):
        export = staged_export(conn, run_id)
        export.write_batch(0, sample_records(300), 1)
        export.publish()
    assert count_published(conn, run_a) == 300
    assert count_published(conn, run_b) == 300
    assert run(conn, "SELECT count(*) FROM sandbox.customers")[0][0] == 600


def test_duplicate_key_across_batches_is_a_row_error_never_an_overwrite(conn) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    assert export.write_batch(0, [{"id": 1, "name": "first", "signup": None}], 1) == []
    batch = [{"id": 2, "name": "b", "signup": None}, {"id": 1, "name": "second", "signup": None}]
    errors = export.write_batch(1, batch, 2)
    assert [(e.record, e.column) for e in errors] == [(3, "id")]
    assert "duplicate key '1'" in errors[0].reason
    assert errors[0].raw == batch[1]
    # The same batch processed again after a crash reports the same error, writes the same.
    assert export.write_batch(1, batch, 2) == errors
    export.publish()
    rows = run(conn, "SELECT id, name FROM sandbox.customers ORDER BY id")
    assert rows == [(1, "first"), (2, "b")]


def test_null_and_repeated_keys_within_a_batch(conn) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    batch = [
        {"id": 5, "name": "a", "signup": None},
        {"id": None, "name": "b", "signup": None},
        {"id": 5, "name": "c", "signup": None},
        {"id": 6, "name": "d", "signup": "2024-02-30"},
    ]
    errors = export.write_batch(0, batch, 10)
    assert [(e.record, e.column) for e in errors] == [(11, "id"), (12, "id"), (13, "signup")]
    assert "null" in errors[0].reason and "record 10" in errors[1].reason
    export.publish()
    assert run(conn, "SELECT id, name FROM sandbox.customers") == [(5, "a")]


def test_ordinal_keys_without_a_key_column(conn) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id, key=None)
    same = [{"id": 1, "name": "same", "signup": None}] * 3
    assert export.write_batch(0, same, 1) == []
    assert export.write_batch(1, same, 4) == []
    assert export.write_batch(1, same, 4) == []  # rewritten batch: same ordinals
    export.publish()
    keys = run(conn, "SELECT record_key FROM sandbox.customers ORDER BY record_key::int")
    assert [k for (k,) in keys] == ["1", "2", "3", "4", "5", "6"]


def test_publish_twice_is_a_no_op(conn) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    export.write_batch(0, sample_records(10), 1)
    assert export.publish() == 10
    assert export.publish() == 0
    assert count_published(conn, run_id) == 10


def test_publish_over_rows_of_the_same_run_and_step_upserts(conn) -> None:
    # Publish inserts (the run's rows are new); a row of the same run and step found in the
    # table all the same makes it fall back to the upsert: updated, never doubled.
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    export.write_batch(0, sample_records(10), 1)
    run(
        conn,
        "INSERT INTO sandbox.customers (id, name, run_id, step_id, record_key)"
        " VALUES (3, 'stale', %s, 'to_table', '3')",
        (str(run_id),),
    )
    assert export.publish() == 10
    assert count_published(conn, run_id) == 10
    name = "SELECT name FROM sandbox.customers WHERE run_id = %s AND record_key = '3'"
    assert run(conn, name, (str(run_id),)) == [(sample_records(10)[2]["name"],)]
    assert staging_tables(conn) == []


def test_concurrent_publishers_publish_once(conn, other) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    export.write_batch(0, sample_records(500), 1)
    stale = TableExport(other, "customers", run_id, "to_table", COLUMNS, "id")
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda e=e: results.append(e.publish())) for e in (export, stale)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [0, 500]
    assert count_published(conn, run_id) == 500


def test_publish_takes_only_committed_batches(conn) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    records = sample_records(30)
    for seq in range(3):
        export.write_batch(seq, records[seq * 10 : (seq + 1) * 10], seq * 10 + 1)
    assert export.publish(n_batches=2) == 20
    assert count_published(conn, run_id) == 20


def test_discard_then_start_over(conn) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    export.write_batch(0, [{"id": 1, "name": "old", "signup": None}], 1)
    export.discard()
    assert staging_tables(conn) == []
    assert export.publish() == 0
    export.prepare()
    assert export.write_batch(0, [{"id": 1, "name": "new", "signup": None}], 1) == []
    export.publish()
    assert run(conn, "SELECT name FROM sandbox.customers") == [("new",)]


def test_values_round_trip_exactly(conn) -> None:
    run_id = uuid.uuid4()
    columns = {"k": "int", "s": "string", 'we"ird; drop table x; --': "string", "d": "date"}
    export = staged_export(conn, run_id, table="roundtrip", columns=columns, key="k")
    tricky = ['a,"b"\nc', "", "\\.", "\\N", "é τ 😀", "  spaced  ", "\r\n"]
    batch = [
        {"k": i, "s": s, 'we"ird; drop table x; --': None if i % 2 else s, "d": "0001-01-01"}
        for i, s in enumerate(tricky)
    ]
    batch.append({"k": -(2**63), "s": None, 'we"ird; drop table x; --': None, "d": None})
    assert export.write_batch(0, batch, 1) == []
    export.publish()
    rows = run(
        conn,
        'SELECT k, s, "we""ird; drop table x; --", d::text FROM sandbox.roundtrip ORDER BY k',
    )
    expected = sorted((r["k"], r["s"], r['we"ird; drop table x; --'], r["d"]) for r in batch)
    assert rows == expected


def test_values_that_do_not_fit_are_row_errors(conn) -> None:
    export = staged_export(conn, uuid.uuid4(), key=None)
    batch = [
        {"id": "1", "name": "a", "signup": None},
        {"id": 2**63, "name": "a", "signup": None},
        {"id": 3, "name": "nul\x00", "signup": None},
        {"id": 4, "name": "a", "signup": "24-01-01"},
        {"id": 5, "name": "ok", "signup": "2024-01-01"},
    ]
    errors = export.write_batch(0, batch, 1)
    assert [(e.record, e.column) for e in errors] == [
        (1, "id"),
        (2, "id"),
        (3, "name"),
        (4, "signup"),
    ]


# ---------------------------------------------------------------- export: the target table


def test_existing_table_gets_missing_columns(conn) -> None:
    staged_export(conn, uuid.uuid4(), columns={"id": "int"}).publish()
    staged_export(conn, uuid.uuid4(), columns={"id": "int", "extra": "string"})
    cols = run(
        conn,
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'sandbox' AND table_name = 'customers' ORDER BY ordinal_position",
    )
    assert cols == [
        ("id", "bigint"),
        ("run_id", "uuid"),
        ("step_id", "text"),
        ("record_key", "text"),
        ("extra", "text"),
    ]


def test_type_conflict_with_the_existing_table(conn) -> None:
    staged_export(conn, uuid.uuid4(), columns={"id": "int"})
    with pytest.raises(TableConflict, match=r"customers\.id is bigint") as exc:
        staged_export(conn, uuid.uuid4(), columns={"id": "string"})
    assert isinstance(exc.value, InputDataError)
    assert exc.value.column == "id"


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE TABLE sandbox.customers (id bigint PRIMARY KEY)",
        "CREATE TABLE sandbox.customers (id bigint, run_id uuid, step_id text, record_key text,"
        " must text NOT NULL, PRIMARY KEY (run_id, step_id, record_key))",
        "CREATE TABLE sandbox.customers (id bigint, run_id text, step_id text, record_key text,"
        " PRIMARY KEY (run_id, step_id, record_key))",
        "CREATE TABLE sandbox.customers (id bigint, name varchar(3), run_id uuid, step_id text,"
        " record_key text, PRIMARY KEY (run_id, step_id, record_key))",
        "CREATE VIEW sandbox.customers AS SELECT 1 AS id",
    ],
)
def test_existing_table_that_cannot_take_the_rows(conn, ddl) -> None:
    run(conn, ddl)
    with pytest.raises(TableConflict):
        staged_export(conn, uuid.uuid4(), columns={"id": "int", "name": "string"})


def test_user_made_table_with_the_contract_shape_is_used(conn) -> None:
    run(
        conn,
        "CREATE TABLE sandbox.customers (record_key text, step_id text, run_id uuid,"
        " id bigint, name character varying, loaded_at timestamptz NOT NULL DEFAULT now(),"
        " PRIMARY KEY (run_id, step_id, record_key))",
    )
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id, columns={"id": "int", "name": "string"})
    export.write_batch(0, [{"id": 1, "name": "x"}], 1)
    assert export.publish() == 1


def test_export_config_refusals(conn) -> None:
    run_id = uuid.uuid4()
    for bad in ("x; drop table y", "sandbox.t", '"q"', ""):
        with pytest.raises(TableRefused):
            TableExport(conn, bad, run_id, "s", COLUMNS, "id")
    for col in ("run_id", "step_id", "record_key", "_etl_batch_seq", "", "x" * 64):
        with pytest.raises(TableConflict):
            TableExport(conn, "t", run_id, "s", {col: "int"}, None)
    with pytest.raises(ConfigValueError):
        TableExport(conn, "t", run_id, "s", COLUMNS, "nope")
    with pytest.raises(ConfigValueError):
        TableExport(conn, "t", run_id, "s", {}, None)


def test_every_named_query_is_loaded() -> None:
    assert {
        "get_relation",
        "list_columns",
        "list_primary_key",
        "lock_export_table",
        "read_first_batch",
        "read_next_batch",
        "create_export_table",
        "add_export_column",
        "create_staging_table",
        "index_staging",
        "create_batch_table",
        "copy_batch",
        "copy_batch_typed",
        "copy_staging",
        "stage_json",
        "stage_columns",
        "upsert_staging",
        "count_staged_rows",
        "lock_staging",
        "insert_staging",
        "export_table_empty",
        "lock_empty_export",
        "empty_export_key",
        "drop_export_key",
        "add_export_key",
        "publish_staging",
        "drop_staging",
        "count_run_rows",
        "withdraw_run_rows",
        "create_merge_table",
        "create_merge_undo",
        "save_merge_undo",
        "merge_staging",
        "delete_merged",
        "list_undo_columns",
        "withdraw_merge_rows",
        "restore_merge_undo",
        "fix_cursor_range",
    } == set(QUERIES)


def test_two_exports_share_one_connection(conn) -> None:
    run_id = uuid.uuid4()
    a = staged_export(conn, run_id, table="ta", step="a", columns={"id": "int"})
    b = staged_export(conn, run_id, table="tb", step="b", columns={"id": "int", "s": "string"})
    for seq in range(3):
        a.write_batch(seq, [{"id": seq}], seq + 1)
        b.write_batch(seq, [{"id": seq, "s": "x"}], seq + 1)
    assert (a.publish(), b.publish()) == (3, 3)
    assert count_published(conn, run_id, "ta") == count_published(conn, run_id, "tb") == 3


def test_a_late_write_after_publish_fails_and_leaks_nothing(conn, other) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    export.write_batch(0, sample_records(5), 1)
    stale = TableExport(other, "customers", run_id, "to_table", COLUMNS, "id")
    assert export.publish() == 5
    with pytest.raises(StagingLost, match="is gone while batch 1 was written"):
        stale.write_batch(1, sample_records(5, start=6), 6)
    assert count_published(other, run_id) == 5  # the connection is usable again: rolled back
    assert staging_tables(conn) == []


def test_count_run_rows_counts_one_run_and_step_once_published(conn) -> None:
    run_id, other_run = uuid.uuid4(), uuid.uuid4()
    assert count_run_rows(conn, "customers", run_id, "to_table") is None  # no table yet
    export = staged_export(conn, run_id)
    export.write_batch(0, sample_records(7), 1)
    assert count_run_rows(conn, "customers", run_id, "to_table") == 0  # staged, not published
    export.publish()
    staged_export(conn, other_run).write_batch(0, sample_records(3), 1)
    assert count_run_rows(conn, "customers", run_id, "to_table") == 7
    assert count_run_rows(conn, "customers", run_id, "another_step") == 0


# ------------------------------------------------- export: committed counters are the truth


def test_publish_makes_exactly_the_committed_rows_visible_or_nothing(conn, other) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    export.write_batch(0, sample_records(5), 1)
    export.write_batch(1, sample_records(5, start=6), 6)
    run(other, f"DELETE FROM {STAGE_SCHEMA}.{export.staging_name} WHERE id <= 3")
    with pytest.raises(StagingLost, match=r"holds 7 row.* the step committed 10"):
        export.publish(2, 10)
    assert count_published(other, run_id) == 0  # nothing half-published
    assert staging_tables(conn) == [export.staging_name]  # and nothing dropped


def test_a_gone_staging_table_is_published_only_when_the_rows_are_there(conn, other) -> None:
    run_id = uuid.uuid4()
    export = staged_export(conn, run_id)
    export.write_batch(0, sample_records(5), 1)
    assert export.publish(1, 5) == 5
    assert export.publish(1, 5) == 0  # a retry of the step's last transaction: a no-op
    with pytest.raises(StagingLost, match="holds 5 of its 8 row"):
        export.publish(1, 8)
    lost = staged_export(conn, uuid.uuid4())
    lost.write_batch(0, sample_records(5), 1)
    run(other, f"DROP TABLE {STAGE_SCHEMA}.{lost.staging_name}")
    with pytest.raises(StagingLost, match=r"is gone and sandbox\.customers holds 0 of its 5"):
        lost.publish(1, 5)


def test_an_attempt_going_on_from_a_checkpoint_checks_what_is_staged(conn, other) -> None:
    export = staged_export(conn, uuid.uuid4())
    export.check_staged(0, 0)  # nothing committed yet: nothing to check
    export.write_batch(0, sample_records(5), 1)
    export.write_batch(1, sample_records(5, start=6), 6)  # written, its batch not committed
    export.check_staged(1, 5)
    with pytest.raises(StagingLost, match="holds 5 where 1 committed batch"):
        export.check_staged(1, 4)
    run(other, f"DROP TABLE {STAGE_SCHEMA}.{export.staging_name}")
    with pytest.raises(StagingLost, match="is gone where 1 committed batch"):
        export.check_staged(1, 5)


def test_an_attempt_after_a_publish_that_committed_finds_it_done(conn) -> None:
    export = staged_export(conn, uuid.uuid4())
    export.write_batch(0, sample_records(5), 1)
    assert export.check_staged(1, 5) is False  # staged, not published
    assert export.publish(1, 5) == 5
    assert export.check_staged(1, 5) is True  # published: nothing to stage again
    with pytest.raises(StagingLost, match="is gone where 1 committed batch"):
        export.check_staged(1, 4)


def test_withdraw_run_rows_deletes_one_run_and_step_only(conn) -> None:
    run_id, other_run = uuid.uuid4(), uuid.uuid4()
    assert withdraw_run_rows(conn, "customers", run_id, "to_table") == 0  # no table yet
    assert withdraw_run_rows(conn, "x; drop table y", run_id, "to_table") == 0
    staged_export(conn, run_id).write_batch(0, sample_records(7), 1)
    staged_export(conn, run_id, step="other").write_batch(0, sample_records(2), 1)
    staged_export(conn, other_run).write_batch(0, sample_records(3), 1)
    for run_, step in ((run_id, "to_table"), (run_id, "other"), (other_run, "to_table")):
        TableExport(conn, "customers", run_, step, COLUMNS, "id").publish()
    assert withdraw_run_rows(conn, "customers", run_id, "to_table") == 7
    assert count_run_rows(conn, "customers", run_id, "to_table") == 0
    assert count_run_rows(conn, "customers", run_id, "other") == 2
    assert count_run_rows(conn, "customers", other_run, "to_table") == 3
