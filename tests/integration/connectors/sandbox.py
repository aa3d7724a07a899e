"""Looking at the sandbox from a test: statements on a connection, sample records, an export
of them, the rows and staging tables a run left."""

from __future__ import annotations

from psycopg2 import sql

from connectors import (
    TableExport,
)
from connectors.table_export import STAGE_SCHEMA

COLUMNS = {"id": "int", "name": "string", "signup": "date"}


def run(conn, statement: str, params: object = None) -> list[tuple]:
    with conn, conn.cursor() as cur:
        cur.execute(statement, params)
        return cur.fetchall() if cur.description else []


def sample_records(n: int, start: int = 1) -> list[dict]:
    return [
        {"id": i, "name": f"name {i}", "signup": f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}"}
        for i in range(start, start + n)
    ]


def staged_export(conn, run_id, *, table="customers", step="to_table", columns=None, key="id"):
    export = TableExport(conn, table, run_id, step, columns or COLUMNS, key)
    export.prepare()
    return export


def count_published(conn, run_id, table="customers") -> int:
    query = sql.SQL("SELECT count(*) FROM {} WHERE run_id = %s").format(
        sql.Identifier("sandbox", table)
    )
    return run(conn, query, (str(run_id),))[0][0]


def staging_tables(conn) -> list[str]:
    rows = run(conn, "SELECT tablename FROM pg_tables WHERE schemaname = %s", (STAGE_SCHEMA,))
    return [r[0] for r in rows]
