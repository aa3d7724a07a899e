"""The merge mode of the table export on real PostgreSQL: one row per record key across
runs, the last publish's values and writer; a publish found done by its undo table; a
withdrawn publish puts back what it overwrote; an append table never switches to merge."""

from __future__ import annotations

import uuid

import pytest

from connectors import TableConflict, TableExport, settle_merge
from connectors.merge_undo import undo_name
from connectors.published_rows import withdraw_run_rows
from tests.integration.connectors.sandbox import COLUMNS, run, staged_export, staging_tables


def _merge(conn, run_id, records, *, batch=500) -> TableExport:
    """`records` staged by a merge export of `run_id`, batch by batch (not published)."""
    export = TableExport(conn, "customers", run_id, "to_table", COLUMNS, "id", "merge")
    export.prepare()
    for seq, start in enumerate(range(0, len(records), batch)):
        assert export.write_batch(seq, records[start : start + batch], start + 1) == []
    return export


def _rows(conn) -> dict[int, tuple]:
    got = run(conn, "SELECT id, name, run_id::text, step_id, record_key FROM sandbox.customers")
    return {r[0]: r[1:] for r in got}


def _people(ids, tag: str) -> list[dict]:
    return [{"id": i, "name": f"{tag} {i}", "signup": "2024-01-02"} for i in ids]


def test_merge_keeps_one_row_per_key_with_the_last_values_and_writer(conn) -> None:
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    assert _merge(conn, first, _people(range(1, 1001), "a")).publish(2, 1000) == 1000
    export = _merge(conn, second, _people(range(501, 1501), "b"))
    assert len(_rows(conn)) == 1000  # invisible until publish
    assert export.publish(2, 1000) == 1000
    rows = _rows(conn)
    assert len(rows) == 1500
    assert rows[1] == ("a 1", first, "to_table", "1")
    assert rows[500] == ("a 500", first, "to_table", "500")
    assert rows[501] == ("b 501", second, "to_table", "501")
    assert rows[1500] == ("b 1500", second, "to_table", "1500")
    key = run(conn, "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid ="
              " i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid ="
              " 'sandbox.customers'::regclass AND i.indisprimary")  # fmt: skip
    assert key == [("record_key",)]


def test_a_publish_found_done_after_a_crash_is_not_applied_twice(conn, other) -> None:
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    _merge(conn, first, _people(range(1, 101), "a")).publish(1, 100)
    _merge(conn, second, _people(range(51, 151), "b"), batch=50).publish(2, 100)
    # The attempt died after its publish: the next one finds it done and publishes nothing.
    again = TableExport(other, "customers", second, "to_table", COLUMNS, "id", "merge")
    assert again.check_staged(2, 100) is True
    assert again.publish(2, 100) == 0
    assert len(_rows(conn)) == 150
    # Its step did not succeed after all: withdrawn, the first run's rows come back.
    assert withdraw_run_rows(conn, "customers", second, "to_table") == 100
    rows = _rows(conn)
    assert sorted(rows) == list(range(1, 101))
    assert all(v[:2] == (f"a {k}", first) for k, v in rows.items())
    assert staging_tables(conn) == [undo_name(first, "to_table")]
    assert settle_merge(conn, first, "to_table") is True
    assert staging_tables(conn) == []


def test_a_withdrawal_leaves_a_later_writers_rows(conn) -> None:
    first, second, third = (str(uuid.uuid4()) for _ in range(3))
    _merge(conn, first, _people(range(1, 11), "a")).publish(1, 10)
    _merge(conn, second, _people(range(1, 11), "b")).publish(1, 10)
    _merge(conn, third, _people(range(6, 16), "c")).publish(1, 10)
    withdraw_run_rows(conn, "customers", second, "to_table")
    rows = _rows(conn)
    assert {k: v[0] for k, v in rows.items()} == {
        **{i: f"a {i}" for i in range(1, 6)},
        **{i: f"c {i}" for i in range(6, 16)},
    }


def test_an_append_table_does_not_switch_to_merge(conn) -> None:
    staged_export(conn, uuid.uuid4()).publish()
    export = TableExport(conn, "customers", uuid.uuid4(), "to_table", COLUMNS, "id", "merge")
    with pytest.raises(TableConflict, match=r"config\.mode: sandbox\.customers exists as an"
                       r" export table of mode 'append'.*\"merge\" needs the primary key"
                       r" \(record_key\)"):  # fmt: skip
        export.prepare()


def test_a_merge_table_does_not_take_an_append_export(conn) -> None:
    _merge(conn, uuid.uuid4(), _people(range(1, 3), "a")).publish()
    with pytest.raises(TableConflict, match=r"config\.mode: .* of mode 'merge'"):
        staged_export(conn, uuid.uuid4())


def test_a_delete_column_deletes_keys_and_a_withdrawal_brings_them_back(conn) -> None:
    columns = {**COLUMNS, "gone": "date"}
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    _merge(conn, first, _people(range(1, 11), "a")).publish(1, 10)
    export = TableExport(conn, "customers", second, "to_table", columns, "id", "merge", "gone")
    export.prepare()
    batch = [
        {**p, "gone": "2024-02-02" if p["id"] % 2 else None} for p in _people(range(5, 15), "b")
    ]
    assert export.write_batch(0, batch, 1) == []
    assert export.publish(1, 10) == 10  # deletes count among the applied rows
    rows = _rows(conn)
    assert sorted(rows) == [1, 2, 3, 4, 6, 8, 10, 12, 14]  # 5, 7, 9 deleted; 11, 13 never added
    assert rows[6][:2] == ("b 6", second) and rows[4][:2] == ("a 4", first)
    withdraw_run_rows(conn, "customers", second, "to_table")
    assert {k: v[:2] for k, v in _rows(conn).items()} == {
        i: (f"a {i}", first) for i in range(1, 11)
    }
