"""The cursor window of an incremental table ingest (`"cursor": COLUMN`): which rows of a
sandbox table a run reads, bounded by a snapshot of the sandbox taken when its step first
starts.

A window holds the mark the step started from (the highest cursor value of the last
succeeded run, and the snapshot that run was bounded by) and its own bound (a snapshot and
the highest cursor value it sees). A run reads the rows its snapshot sees whose cursor is
above the mark, and the rows its snapshot sees that the mark's snapshot did not although
their cursor is not above the mark: rows committed late (a transaction that took its cursor
value before the last run's bound and committed after it), or a null cursor. Rows committed
after the bound wait for the next run, whatever their cursor; a resumed step reads the same
rows, since visibility in a fixed snapshot does not change.

A row's inserting transaction is its `xmin` (32 bits), widened to the 64-bit id the
snapshot functions take by the current epoch: exact for any row written within the last
2^31 transactions of the mark, which covers every late row between two runs."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from connectors.errors import TableRefused
from connectors.sandbox import SANDBOX_SCHEMA
from connectors.sql import QUERIES

# Catalog base types with an order a cursor may follow: int, date, timestamp, string.
CURSOR_TYPES = frozenset(
    {"int2", "int4", "int8", "date", "timestamp", "timestamptz", "text", "varchar", "bpchar"}
)

# The newest transaction id (64 bits) for widening a row's 32-bit `xmin`.
_HORIZON = "CROSS JOIN (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS nxt) AS h"
_ROW_XID = (
    "(h.nxt - ((h.nxt %% 4294967296 - src.xmin::text::bigint + 4294967296) %% 4294967296))"
    "::text::xid8"
)


@dataclass(frozen=True)
class CursorWindow:
    """The rows of one run of an incremental ingest: above `lower` (the mark, None for the
    start) or unseen by `lower_snapshot`, and seen by `snapshot`; `upper` is the highest
    cursor value `snapshot` sees (the run's mark if it succeeds), `late_rows` how many rows
    it reads that are not above `lower`."""

    column: str
    pg_type: str
    lower: str | None
    lower_snapshot: str | None
    upper: str | None
    snapshot: str
    late_rows: int = 0

    def params(self) -> dict[str, str | None]:
        return {
            "w_lower": self.lower,
            "w_lower_snapshot": self.lower_snapshot,
            "w_snapshot": self.snapshot,
        }


def cursor_type(column: str, base_types: dict[str, str], pg_types: dict[str, str]) -> str:
    """The formatted type of the cursor `column`, or `TableRefused` naming `config.cursor`
    when the table has no such column or its type has no order a cursor can follow."""
    if column not in base_types:
        raise TableRefused(
            f"config.cursor: the table has no column {column!r} (columns: {', '.join(base_types)})"
        )
    if base_types[column] not in CURSOR_TYPES:
        raise TableRefused(
            f"config.cursor: column {column!r} is {pg_types[column]}; a cursor column must be "
            "an integer, date, timestamp or string (text, varchar, char) column"
        )
    return pg_types[column]


def _late(column: str, pg_type: str, lower: str, lower_snapshot: str) -> sql.Composable:
    """Rows not above the mark that the mark's snapshot did not see."""
    return sql.SQL(
        "(({col} > CAST({lower} AS {type})) IS NOT TRUE AND {lsnap}::text IS NOT NULL"
        " AND NOT pg_visible_in_snapshot({xid}, {lsnap}::pg_snapshot))"
    ).format(
        col=sql.Identifier("src", column),
        type=sql.SQL(pg_type),
        lower=sql.Placeholder(lower),
        lsnap=sql.Placeholder(lower_snapshot),
        xid=sql.SQL(_ROW_XID),
    )


def window_filter(window: CursorWindow | None) -> tuple[sql.Composable, sql.Composable]:
    """The `(horizon, window)` parts of the read queries for `window` (none: every row)."""
    if window is None:
        return sql.SQL(""), sql.SQL("true")
    predicate = sql.SQL(
        "pg_visible_in_snapshot({xid}, {snap}::pg_snapshot) AND (({lower}::text IS NULL"
        " AND {lsnap}::text IS NULL) OR {col} > CAST({lower} AS {type}) OR {late})"
    ).format(
        xid=sql.SQL(_ROW_XID),
        snap=sql.Placeholder("w_snapshot"),
        lower=sql.Placeholder("w_lower"),
        lsnap=sql.Placeholder("w_lower_snapshot"),
        col=sql.Identifier("src", window.column),
        type=sql.SQL(window.pg_type),
        late=_late(window.column, window.pg_type, "w_lower", "w_lower_snapshot"),
    )
    return sql.SQL(_HORIZON), predicate


def fix_cursor_range(
    conn: Connection,
    table: str,
    column: str,
    pg_type: str,
    lower: str | None,
    lower_snapshot: str | None,
) -> CursorWindow:
    """The window of a run starting now from the mark (`lower`, `lower_snapshot`): one
    statement's snapshot and the highest cursor value it sees. `TableRefused` when the mark
    is not a value of the column's type (an admin set it so)."""
    query = sql.SQL(QUERIES["fix_cursor_range"]).format(
        column=sql.Identifier("src", column),
        type=sql.SQL(pg_type),
        table=sql.Identifier(SANDBOX_SCHEMA, table),
        horizon=sql.SQL(_HORIZON),
        late=_late(column, pg_type, "lower", "lower_snapshot"),
    )
    try:
        with conn, conn.cursor() as cur:
            cur.execute(query, {"lower": lower, "lower_snapshot": lower_snapshot})
            snapshot, upper, late = cur.fetchone()
    except psycopg2.DataError as exc:
        raise TableRefused(
            f"config.cursor: the mark {lower!r} is not a value of type {pg_type} of column "
            f"{column!r} ({str(exc).strip().splitlines()[0]}); set or reset the pipeline's cursor"
        ) from exc
    return CursorWindow(column, pg_type, lower, lower_snapshot, upper, snapshot, late)
