"""Table ingest on real PostgreSQL: the catalog guard (names, kinds, types, keys) and keyset
pagination with resume."""

from __future__ import annotations

import pytest

from connectors import (
    TableRefused,
    read_table_batches,
    resolve_source_table,
)
from dag.errors import InputDataError
from tests.integration.connectors.sandbox import (
    run,
)

# ---------------------------------------------------------------- ingest: the catalog guard


@pytest.mark.parametrize(
    "name",
    [
        "x; drop table y",
        '"quoted"',
        "pg_catalog.pg_class",
        "pg_class",
        "public.elsewhere",
        "elsewhere",
        "sandbox.people",
        "a_view",
        "missing",
        "",
        "People",
        "x" * 64,
        None,
        "people--",
        "peo ple",
    ],
)
def test_hostile_or_unknown_table_names_refused(conn, name) -> None:
    run(conn, "CREATE TABLE sandbox.people (id int PRIMARY KEY)")
    run(conn, "CREATE TABLE sandbox.y (id int PRIMARY KEY)")
    run(conn, "CREATE TABLE public.elsewhere (id int PRIMARY KEY)")
    run(conn, "CREATE VIEW sandbox.a_view AS SELECT id FROM sandbox.people")
    with pytest.raises(TableRefused) as exc:
        resolve_source_table(conn, name)
    assert isinstance(exc.value, InputDataError)
    assert run(conn, "SELECT to_regclass('sandbox.y') IS NOT NULL")[0][0]


def test_weird_name_refused_even_when_such_a_table_exists(conn) -> None:
    run(conn, 'CREATE TABLE sandbox."x; drop table y" (id int PRIMARY KEY)')
    with pytest.raises(TableRefused, match="plain name"):
        resolve_source_table(conn, "x; drop table y")


def test_view_refused_naming_its_kind(conn) -> None:
    run(conn, "CREATE TABLE sandbox.people (id int PRIMARY KEY)")
    run(conn, "CREATE VIEW sandbox.v AS SELECT id FROM sandbox.people")
    with pytest.raises(TableRefused, match="is a view"):
        resolve_source_table(conn, "v")


def test_table_without_primary_key_refused(conn) -> None:
    run(conn, "CREATE TABLE sandbox.nokey (id int UNIQUE, name text)")
    with pytest.raises(TableRefused, match="no primary key"):
        resolve_source_table(conn, "nokey")


def test_column_types_mapped_from_the_catalog(conn) -> None:
    run(conn, "CREATE DOMAIN sandbox.small_count AS integer CHECK (VALUE >= 0)")
    run(
        conn,
        """CREATE TABLE sandbox.typed (
            i2 smallint, i4 integer PRIMARY KEY, i8 bigint, d date, t text, vc varchar(10),
            ch char(3), u uuid, num numeric(10, 2), r real, f double precision, b boolean,
            j jsonb, ts timestamp, arr int[], dom sandbox.small_count, "Odd Name" text)""",
    )
    run(
        conn,
        """INSERT INTO sandbox.typed VALUES (-2, 4, 9223372036854775807, '2024-02-29', 'τ',
            'v', 'ab', '00000000-0000-0000-0000-000000000001', 12.50, 1.5, 0.1, true,
            '{"k": [1]}', '2024-01-02 03:04:05', '{1,2}', 7, 'x'),
            (NULL, 5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
             NULL, NULL, NULL)""",
    )
    source = resolve_source_table(conn, "typed")
    strings = ("t", "vc", "ch", "u", "num", "r", "f", "b", "j", "ts", "arr", "Odd Name")
    assert source.columns == {
        "i2": "int", "i4": "int", "i8": "int", "d": "date", **dict.fromkeys(strings, "string"),
        "dom": "int",
    }  # fmt: skip
    assert list(source.columns) == ["i2", "i4", "i8", "d", *strings[:-1], "dom", "Odd Name"]
    assert source.key == ["i4"]
    assert source.pg_types["vc"] == "character varying(10)"
    [(records, last_key)] = list(read_table_batches(conn, source))
    assert records[0] == {
        "i2": -2, "i4": 4, "i8": 9223372036854775807, "d": "2024-02-29", "t": "τ", "vc": "v",
        "ch": "ab",  # char(n)::text drops the padding, as PostgreSQL compares it
        "u": "00000000-0000-0000-0000-000000000001", "num": "12.50", "r": "1.5", "f": "0.1",
        "b": "true", "j": '{"k": [1]}', "ts": "2024-01-02 03:04:05", "arr": "{1,2}", "dom": 7,
        "Odd Name": "x",
    }  # fmt: skip
    assert list(records[0]) == list(source.columns)  # key order = column order
    assert records[1] == {c: (5 if c == "i4" else None) for c in source.columns}
    assert last_key == [5]


# ---------------------------------------------------------------- ingest: keyset pagination


@pytest.fixture
def composite(conn) -> list[tuple[str, int]]:
    """1,234 rows keyed by (grp text, seq int), inserted out of key order."""
    run(
        conn,
        """CREATE TABLE sandbox.events (
            grp text COLLATE "C", seq integer, payload text, PRIMARY KEY (grp, seq))""",
    )
    run(
        conn,
        """INSERT INTO sandbox.events
           SELECT 'g' || lpad((i % 37)::text, 2, '0'), i, 'p' || i
           FROM generate_series(1, 1234) AS i ORDER BY random()""",
    )
    return sorted((f"g{i % 37:02d}", i) for i in range(1, 1235))


def test_keyset_pagination_composite_key(conn, composite) -> None:
    source = resolve_source_table(conn, "events")
    assert source.key == ["grp", "seq"]
    batches = list(read_table_batches(conn, source))
    assert [len(records) for records, _ in batches] == [500, 500, 234]
    keys = [(r["grp"], r["seq"]) for records, _ in batches for r in records]
    assert keys == composite
    for records, last_key in batches:
        assert last_key == [records[-1]["grp"], records[-1]["seq"]]
        assert all(r["payload"] == f"p{r['seq']}" for r in records)


@pytest.mark.parametrize("cut", [0, 1, 499, 500, 777, 1233])
def test_resume_after_a_key_yields_exactly_the_rest(conn, composite, cut) -> None:
    source = resolve_source_table(conn, "events")
    after = list(composite[cut - 1]) if cut else None
    rest = [
        (r["grp"], r["seq"])
        for records, _ in read_table_batches(conn, source, after_key=after, batch_size=500)
        for r in records
    ]
    assert rest == composite[cut:]


def test_resume_from_a_checkpointed_last_key(conn, composite) -> None:
    source = resolve_source_table(conn, "events")
    first_records, last_key = next(read_table_batches(conn, source, batch_size=100))
    resumed = [
        (r["grp"], r["seq"])
        for records, _ in read_table_batches(conn, source, after_key=last_key, batch_size=100)
        for r in records
    ]
    assert [(r["grp"], r["seq"]) for r in first_records] + resumed == composite


def test_keyset_on_a_numeric_key_sorts_by_the_real_type(conn) -> None:
    # Regression: a key read back as text must still sort and compare as numeric
    # (text order would put 10 before 9 and repeat or skip rows across batches).
    run(conn, "CREATE TABLE sandbox.amounts (k numeric PRIMARY KEY, v int)")
    run(conn, "INSERT INTO sandbox.amounts SELECT g, g FROM generate_series(1, 1200) g")
    source = resolve_source_table(conn, "amounts")
    values = [r["v"] for records, _ in read_table_batches(conn, source) for r in records]
    assert values == list(range(1, 1201))


def test_empty_table_yields_nothing(conn) -> None:
    run(conn, "CREATE TABLE sandbox.empty (d date PRIMARY KEY)")
    assert list(read_table_batches(conn, resolve_source_table(conn, "empty"))) == []


def test_date_key_resumes(conn) -> None:
    run(conn, "CREATE TABLE sandbox.days (d date PRIMARY KEY)")
    run(conn, "INSERT INTO sandbox.days SELECT '2024-01-01'::date + generate_series(0, 9)")
    source = resolve_source_table(conn, "days")
    batches = list(read_table_batches(conn, source, after_key=["2024-01-03"], batch_size=3))
    assert [r["d"] for records, _ in batches for r in records] == [
        f"2024-01-{d:02d}" for d in range(4, 11)
    ]
