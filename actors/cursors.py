"""The range of an incremental table ingest (`"cursor": COLUMN`) in a run: fixed when its
step first starts (from the pipeline's mark and a snapshot of the sandbox, see
`connectors.table_cursor`) and kept on the step, so a retry, a resumed or a taken-over
attempt reads the same rows; and the mark's advance in the transaction that ends the run
succeeded."""

from __future__ import annotations

import logging

import connectors
from actors.sql import CURSOR_QUERIES
from ddl import Cursor

log = logging.getLogger("etl.executor")


def step_window(
    state_conn, sandbox_conn, run_id: str, step: str, source, column: str
) -> connectors.CursorWindow:
    """The cursor window of `step` of `run_id` over `source` (a `connectors.SourceTable`):
    the one saved for it, else a window fixed now from the pipeline's mark and saved (the
    first saved wins). `TableRefused` naming `config.cursor` for a column that cannot be one."""
    pg_type = connectors.cursor_type(column, source.base_types, source.pg_types)
    params = {"run_id": run_id, "step": step}
    with state_conn.cursor(cursor_factory=Cursor) as cur:
        cur.execute(CURSOR_QUERIES["get_cursor_range"], params)
        saved = cur.fetchone()
        mark = None
        if saved is None:
            cur.execute(CURSOR_QUERIES["get_cursor_mark"], params)
            mark = cur.fetchone()
    state_conn.commit()  # read only; ends the transaction as `meet_schema` does
    if saved is None:
        version = None if mark is None else mark["version"]
        lower, lower_snapshot = (None, None)
        if mark is not None and (mark["table_name"], mark["column_name"]) == (source.name, column):
            lower, lower_snapshot = mark["value"], mark["snapshot"]
        window = connectors.fix_cursor_range(
            sandbox_conn, source.name, column, pg_type, lower, lower_snapshot
        )
        with state_conn.cursor(cursor_factory=Cursor) as cur:
            cur.execute(
                CURSOR_QUERIES["save_cursor_range"],
                {
                    **params,
                    "table": source.name,
                    "column": column,
                    "lower": window.lower,
                    "lower_snapshot": window.lower_snapshot,
                    "version": version,
                    "upper": window.upper,
                    "snapshot": window.snapshot,
                    "late_rows": window.late_rows,
                },
            )
            cur.execute(CURSOR_QUERIES["get_cursor_range"], params)
            saved = cur.fetchone()
        state_conn.commit()
        if window.late_rows:
            log.warning(
                "rows at or below the cursor mark, committed after it, are read",
                extra={"run_id": run_id, "step": step, "late_rows": window.late_rows},
            )
    table, saved_column = saved["table_name"], saved["column_name"]
    if (table, saved_column) != (source.name, column):
        raise connectors.TableRefused(
            f"config.cursor: the step's range was fixed on {table}.{saved_column}"
        )
    bounds = ("lower_value", "lower_snapshot", "upper_value", "snapshot", "late_rows")
    return connectors.CursorWindow(column, pg_type, *(saved[b] for b in bounds))


def advance_marks(cur, run_id: str) -> None:
    """Inside the transaction that ends `run_id` succeeded: the marks of its cursor ingests
    become the bounds of their ranges (a mark an admin set or reset meanwhile stays)."""
    cur.execute(CURSOR_QUERIES["advance_cursor_marks"], {"run_id": run_id})
