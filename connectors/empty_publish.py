"""A publish into an empty export table builds the table's primary key after its rows.

An `append` publish inserts the step's rows into `sandbox.NAME` in one transaction. Into a
table holding rows, each row also goes into the primary key's index one at a time. Into an
empty table, the publish takes the table alone, drops the key, inserts the rows and adds
the key back, its index built by one sort: the same table, key and constraint name when
it commits, in far less server time (a first load or backfill into a new table). Readers
of the table wait for that transaction instead of seeing it empty; readers already there
keep the publish on the row-at-a-time way (the lock is asked for without waiting), as do a
role that does not own the table and a key something depends on (`empty_export_key` in
`queries.sql`, and a view that groups by the key, which refuses the key's drop)."""

from __future__ import annotations

from typing import Any

import psycopg2.errors
from psycopg2 import sql

from connectors.sandbox import SANDBOX_SCHEMA
from connectors.sql import QUERIES

_SAVEPOINT = sql.Identifier("empty_publish")


class DroppedKey:
    """The primary key a publish dropped from an empty export table, to add back."""

    def __init__(self, table: sql.Composable, name: str, columns: list[str]):
        self.table = table
        self.name = name
        self.columns = columns

    def restore(self, cur: Any) -> None:
        """Add the key back over the rows now in the table (one sorted index build); a
        repeated key fails it with a unique violation, as the row-at-a-time insert would."""
        cur.execute(
            sql.SQL(QUERIES["add_export_key"]).format(
                table=self.table,
                name=sql.Identifier(self.name),
                columns=sql.SQL(", ").join(map(sql.Identifier, self.columns)),
            )
        )


def drop_key_when_empty(cur: Any, table: str) -> DroppedKey | None:
    """On the publish's cursor and transaction: when `sandbox.<table>` can be taken alone
    at once, is empty and its key is plain, drop the key and return it; else None, the
    transaction as it was (the lock given back)."""
    target = sql.Identifier(SANDBOX_SCHEMA, table)
    cur.execute(sql.SQL(QUERIES["export_table_empty"]).format(table=target))
    if not cur.fetchone()[0]:
        return None  # rows there: no lock taken (it would also reach a standby's readers)
    cur.execute(sql.SQL("SAVEPOINT {}").format(_SAVEPOINT))
    try:
        cur.execute(sql.SQL(QUERIES["lock_empty_export"]).format(table=target))
        cur.execute(
            sql.SQL(QUERIES["empty_export_key"]).format(table=target),
            {"schema": SANDBOX_SCHEMA, "name": table},
        )
        row = cur.fetchone()
        if row is not None:
            key = DroppedKey(target, *row)
            drop = sql.SQL(QUERIES["drop_export_key"])
            cur.execute(drop.format(table=target, name=sql.Identifier(key.name)))
            return key
    except (
        psycopg2.errors.LockNotAvailable,  # another session holds the table
        psycopg2.errors.DependentObjectsStillExist,  # a view relies on the key
        psycopg2.errors.InsufficientPrivilege,  # may insert, not lock or alter
    ):
        pass
    cur.execute(sql.SQL("ROLLBACK TO SAVEPOINT {}").format(_SAVEPOINT))
    return None
