"""The rows one step of one run published into `sandbox.<table>`: counted (the console, and
an attempt that finds its publish done) and withdrawn (a step that did not succeed)."""

from __future__ import annotations

import uuid

from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from connectors.errors import TableRefused
from connectors.merge_undo import withdraw_merge
from connectors.sandbox import SANDBOX_SCHEMA, check_table_name, export_lock_key, get_relation
from connectors.sql import QUERIES


def count_run_rows(conn: Connection, table: str, run_id: object, step_name: str) -> int | None:
    """The rows `step_name` of `run_id` published into `sandbox.<table>`, in its own sandbox
    transaction; None when the table does not exist (nothing published yet)."""
    return _on_rows(conn, "count_run_rows", table, run_id, step_name)


def withdraw_run_rows(conn: Connection, table: str, run_id: object, step_name: str) -> int:
    """Withdraw what `step_name` of `run_id` published into `sandbox.<table>`, in its own
    sandbox transaction: a step that ended without succeeding after its publish (its
    attempt died or failed before the step's final commit). Its rows are deleted; a merge
    publish also puts back the rows it overwrote (`connectors.merge_undo`). The rows
    deleted; none for a table name that is refused (nothing could be published there)."""
    try:
        name = check_table_name(table)
    except TableRefused:
        return 0
    with conn, conn.cursor() as cur:
        cur.execute(QUERIES["lock_export_table"], {"lock_key": export_lock_key(name)})
        merged = withdraw_merge(cur, name, run_id, step_name)
    if merged is not None:
        return merged
    return _on_rows(conn, "withdraw_run_rows", table, run_id, step_name) or 0


def _on_rows(conn: Connection, query: str, table: str, run_id: object, step_name: str):
    """`query` over one step's rows of one run; its count, or None without the table."""
    name = check_table_name(table)
    with conn, conn.cursor() as cur:
        if get_relation(cur, SANDBOX_SCHEMA, name) is None:
            return None
        statement = sql.SQL(QUERIES[query]).format(table=sql.Identifier(SANDBOX_SCHEMA, name))
        cur.execute(statement, {"run_id": str(uuid.UUID(str(run_id))), "step_id": step_name})
        return cur.fetchone()[0]
