"""Schema drift of a file ingest as its attempt meets it (`dag.schemadrift` decides).

Who calls it: `actors.steps.FileSource`, once, when a step starting from scratch has read
its input's header and typed its columns, before its first batch. It runs on the attempt's
state connection, which holds no work of its own then: it reads the step's columns in the
pipeline's last succeeded run, records a change on the step and commits, then raises
`SchemaChanged` under `fail`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from actors.sql import CHECK_QUERIES
from dag.schemadrift import SchemaChanged, change_message, column_change, schema_mode
from ddl import Cursor

__all__ = ["meet_schema"]


def meet_schema(
    conn, run_id: str, step: str, config: Mapping[str, Any], columns: Sequence[str]
) -> dict[str, Any] | None:
    """The change of `columns` since the last succeeded run (recorded on the step), or
    None; `SchemaChanged` when the step's `on_schema_change` is `fail`."""
    params = {"run_id": run_id, "step": step}
    with conn.cursor(cursor_factory=Cursor) as cur:
        cur.execute(CHECK_QUERIES["get_previous_columns"], params)
        row = cur.fetchone()
        previous = None if row is None else [name for name, _ in row["columns"]]
        change = column_change(previous, columns)
        if change is not None:
            change = {**change, "since_run": str(row["run_id"])}
            cur.execute(
                CHECK_QUERIES["save_schema_change"], {**params, "change": json.dumps(change)}
            )
    conn.commit()
    if change is not None and schema_mode(config) == "fail":
        raise SchemaChanged(change_message(change, change["since_run"]))
    return change
