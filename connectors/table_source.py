"""Table ingest from the PostgreSQL sandbox: the catalog look-up of a source table in schema
`sandbox` and keyset pagination over its primary key, resumable from a checkpointed key.

Names are checked and looked up by the rules of `connectors.sandbox`; only ordinary (or
partitioned) tables with a primary key are read.

Type mapping (catalog base type -> column type): smallint/integer/bigint -> `int`;
date -> `date` (ISO string); every other type (text, varchar, char, uuid, numeric, real,
double precision, boolean, json, timestamps, arrays, ...) -> `string`, read as its PostgreSQL
text form (`::text`), which loses nothing and never refuses a table."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from connectors.errors import TableRefused
from connectors.sandbox import (
    SANDBOX_SCHEMA,
    check_table_name,
    get_relation,
    is_table,
    relation_kind,
)
from connectors.sql import QUERIES
from connectors.table_cursor import CursorWindow, window_filter
from dag.limits import BATCH_SIZE

_INT_TYPES = frozenset({"int2", "int4", "int8"})


@dataclass(frozen=True)
class SourceTable:
    """A sandbox table ingest may read: its columns (name -> int|string|date, in table
    order), its primary key (column names in key order) and the catalog types."""

    name: str
    columns: dict[str, str]
    key: list[str]
    pg_types: dict[str, str]
    base_types: dict[str, str] = field(default_factory=dict)


def map_column_type(base_type: str) -> str:
    """The column type (`int`, `date`, `string`) of a catalog base type name (`typname`)."""
    if base_type in _INT_TYPES:
        return "int"
    if base_type == "date":
        return "date"
    return "string"


def resolve_source_table(conn: Connection, name: object) -> SourceTable:
    """Look `name` up as an ordinary (or partitioned) table of schema `sandbox` by exact name.

    `TableRefused` when the name is not a plain name, names nothing, names a view or other
    relation, or the table has no primary key (keyset pagination needs one)."""
    check_table_name(name)
    with conn, conn.cursor() as cur:
        relation = get_relation(cur, SANDBOX_SCHEMA, name)
        if relation is None:
            raise TableRefused(f"no table {name!r} in schema {SANDBOX_SCHEMA!r}")
        oid, relkind = relation
        if not is_table(relkind):
            raise TableRefused(f"{SANDBOX_SCHEMA}.{name} is {relation_kind(relkind)}, not a table")
        cur.execute(QUERIES["list_columns"], {"oid": oid})
        catalog = cur.fetchall()
        cur.execute(QUERIES["list_primary_key"], {"oid": oid})
        key = [row[0] for row in cur.fetchall()]
    if not key:
        raise TableRefused(
            f"{SANDBOX_SCHEMA}.{name} has no primary key: reading it in resumable batches needs one"
        )
    return SourceTable(
        name=name,
        columns={col: map_column_type(base) for col, base, _, _, _ in catalog},
        key=key,
        pg_types={col: formatted for col, _, formatted, _, _ in catalog},
        base_types={col: base for col, base, _, _, _ in catalog},
    )


def read_table_batches(
    conn: Connection,
    source: SourceTable,
    *,
    after_key: list[Any] | None = None,
    batch_size: int = BATCH_SIZE,
    window: CursorWindow | None = None,
) -> Iterator[tuple[list[dict[str, Any]], list[Any]]]:
    """Yield `(records, last_key)` batches of `source` in primary-key order, starting after
    `after_key` (a `last_key` from an earlier batch) or at the beginning.

    Records are typed records (int, ISO date string, text form, None); `last_key` holds the
    key values of the batch's last record and is JSON-able, for the checkpoint. Each batch is
    one short transaction on `conn` (a sandbox connection no one else uses meanwhile)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if after_key is not None and len(after_key) != len(source.key):
        raise ValueError(f"after_key {after_key!r} does not match key {source.key!r}")
    table = sql.Identifier(SANDBOX_SCHEMA, source.name)
    select_list = sql.SQL(", ").join(
        sql.SQL("{}::text AS {}").format(sql.Identifier("src", c), sql.Identifier(c))
        if t == "string"
        else sql.Identifier("src", c)
        for c, t in source.columns.items()
    )
    key = sql.SQL(", ").join(sql.Identifier("src", k) for k in source.key)
    placeholders = [f"k{i}" for i in range(len(source.key))]
    horizon, where = window_filter(window)
    parts = {"select_list": select_list, "table": table, "key": key, "horizon": horizon}
    first = sql.SQL(QUERIES["read_first_batch"]).format(window=where, **parts)
    following = sql.SQL(QUERIES["read_next_batch"]).format(
        after=sql.SQL(", ").join(sql.Placeholder(p) for p in placeholders), window=where, **parts
    )
    bounds = window.params() if window is not None else {}
    names = list(source.columns)
    types = [source.columns[c] for c in names]
    last_key = list(after_key) if after_key is not None else None
    while True:
        with conn, conn.cursor() as cur:
            if last_key is None:
                cur.execute(first, {"limit": batch_size, **bounds})
            else:
                params = dict(zip(placeholders, last_key, strict=True))
                cur.execute(following, {"limit": batch_size, **params, **bounds})
            rows = cur.fetchall()
        if not rows:
            return
        records = [_typed_record(names, types, row) for row in rows]
        last_key = [records[-1][k] for k in source.key]
        yield records, list(last_key)
        if len(rows) < batch_size:
            return


def _typed_record(names: list[str], types: list[str], row: tuple[Any, ...]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for name, kind, value in zip(names, types, row, strict=True):
        if value is not None and kind == "date":
            value = value.isoformat()
        record[name] = value
    return record
