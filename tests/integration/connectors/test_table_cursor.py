"""The cursor window of an incremental table ingest on real PostgreSQL: rows above the mark
and seen by the bound's snapshot, rows committed late below the mark, the column checks."""

from __future__ import annotations

import re

import psycopg2
import pytest

from connectors import (
    TableRefused,
    cursor_type,
    fix_cursor_range,
    read_table_batches,
    resolve_source_table,
)
from tests.integration.connectors.sandbox import run


def _ids(conn, window) -> list[int]:
    source = resolve_source_table(conn, "src")
    return [
        r["id"]
        for records, _ in read_table_batches(conn, source, batch_size=3, window=window)
        for r in records
    ]


def _window(conn, lower=None, lower_snapshot=None):
    return fix_cursor_range(conn, "src", "n", "integer", lower, lower_snapshot)


def test_a_window_reads_above_the_mark_up_to_its_snapshot_and_late_rows_below(conn, db_url) -> None:
    run(conn, "CREATE TABLE sandbox.src (id int PRIMARY KEY, n int)")
    run(conn, "INSERT INTO sandbox.src SELECT g, g * 10 FROM generate_series(1, 10) g")
    late = psycopg2.connect(db_url)
    try:
        with late.cursor() as cur:  # takes cursor value 15, commits after the bound
            cur.execute("INSERT INTO sandbox.src VALUES (100, 15)")
        first = _window(conn)
        assert (first.lower, first.upper, first.late_rows) == (None, "100", 0)
        run(conn, "INSERT INTO sandbox.src VALUES (11, 110), (12, NULL)")
        late.commit()
    finally:
        late.close()
    assert _ids(conn, first) == list(range(1, 11))  # nothing committed after its snapshot
    second = _window(conn, first.upper, first.snapshot)
    assert (second.upper, second.late_rows) == ("110", 2)  # the late row and the null one
    assert _ids(conn, second) == [11, 12, 100]
    third = _window(conn, second.upper, second.snapshot)
    assert (third.upper, third.late_rows, _ids(conn, third)) == ("110", 0, [])
    # a mark set by hand (no snapshot): strictly above it only
    assert _ids(conn, _window(conn, "95")) == [10, 11]


def test_rows_without_a_cursor_value_are_read_once(conn) -> None:
    run(conn, "CREATE TABLE sandbox.src (id int PRIMARY KEY, n int)")
    run(conn, "INSERT INTO sandbox.src VALUES (1, NULL), (2, NULL)")
    first = _window(conn)
    assert (first.upper, _ids(conn, first)) == (None, [1, 2])
    run(conn, "INSERT INTO sandbox.src VALUES (3, NULL)")
    second = _window(conn, first.upper, first.snapshot)
    assert (second.upper, _ids(conn, second)) == (None, [3])


def test_the_bound_never_falls_below_the_mark(conn) -> None:
    run(conn, "CREATE TABLE sandbox.src (id int PRIMARY KEY, n int)")
    assert _window(conn).upper is None
    assert _window(conn, "7").upper == "7"


def test_a_mark_that_is_no_value_of_the_column_is_refused(conn) -> None:
    run(conn, "CREATE TABLE sandbox.src (id int PRIMARY KEY, n int)")
    message = "config.cursor: the mark 'soon' is not a value of type integer"
    with pytest.raises(TableRefused, match=re.escape(message)):
        _window(conn, "soon")


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ("missing", "config.cursor: the table has no column 'missing'"),
        ("doc", "config.cursor: column 'doc' is jsonb; a cursor column must be"),
        ("flag", "config.cursor: column 'flag' is boolean"),
    ],
)
def test_a_cursor_column_must_exist_and_have_an_order(conn, column, message) -> None:
    run(conn, "CREATE TABLE sandbox.src (id int PRIMARY KEY, doc jsonb, flag boolean)")
    source = resolve_source_table(conn, "src")
    with pytest.raises(TableRefused, match=re.escape(message)):
        cursor_type(column, source.base_types, source.pg_types)


@pytest.mark.parametrize(
    ("ddl", "values", "mark", "expected"),
    [
        ("timestamptz", ["2024-01-01 10:00+00", "2024-01-02 10:00+00"], 1, [2]),
        ("date", ["2024-01-01", "2024-02-01"], 1, [2]),
        ("timestamp", ["2024-01-01 10:00", "2024-01-01 10:00:01"], 1, [2]),
        ("varchar(8)", ["b", "c"], 1, [2]),
        ("bigint", [9, 50], 1, [2]),  # as text, "50" sorts before "9"
    ],
)
def test_ordered_types_compare_in_their_own_order(conn, ddl, values, mark, expected) -> None:
    run(conn, f"CREATE TABLE sandbox.src (id int PRIMARY KEY, c {ddl})")
    for i, value in enumerate(values, start=1):
        run(conn, "INSERT INTO sandbox.src VALUES (%s, %s)", (i, value))
    source = resolve_source_table(conn, "src")
    pg_type = cursor_type("c", source.base_types, source.pg_types)
    upto = fix_cursor_range(conn, "src", "c", pg_type, _text(conn, ddl, values[mark - 1]), None)
    got = [r["id"] for recs, _ in read_table_batches(conn, source, window=upto) for r in recs]
    assert got == expected


def _text(conn, ddl: str, value) -> str:
    return run(conn, f"SELECT CAST(%s AS {ddl})::text", (value,))[0][0]
