"""A merge export's undo table `etl_stage.u_<hash of run and step>`: the rows of
`sandbox.NAME` one step's publish overwrote, as they were. The publish creates it in its own
transaction, so its presence says the publish happened (an attempt that died between its
publish and its step's final commit finds it); a step that did not succeed is withdrawn by
it (its rows go, the overwritten ones come back); a step that succeeded drops it."""

from __future__ import annotations

import uuid
from typing import Any

from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from connectors.sandbox import SANDBOX_SCHEMA, STAGE_SCHEMA, get_relation, step_digest
from connectors.sql import QUERIES


def undo_name(run_id: object, step_name: str) -> str:
    """The undo table's name (in `STAGE_SCHEMA`) of `step_name` in `run_id`."""
    return f"u_{step_digest(str(uuid.UUID(str(run_id))), step_name)}"


def undo_exists(cur: Any, run_id: object, step_name: str) -> bool:
    """Whether the step's merge publish happened (and was neither withdrawn nor settled), on
    the caller's cursor and transaction."""
    return get_relation(cur, STAGE_SCHEMA, undo_name(run_id, step_name)) is not None


def withdraw_merge(cur: Any, table: str, run_id: object, step_name: str) -> int | None:
    """Undo the step's merge publish into `sandbox.<table>` on the caller's cursor and
    transaction: its rows that no later writer replaced are deleted, the rows it overwrote
    are put back unless a later writer holds their key, and the undo table is dropped. The
    rows deleted; None when there is no undo table (nothing published by a merge)."""
    undo = get_relation(cur, STAGE_SCHEMA, undo_name(run_id, step_name))
    if undo is None:
        return None
    cur.execute(QUERIES["list_undo_columns"], {"oid": undo[0]})
    columns = sql.SQL(", ").join(sql.Identifier(c) for (c,) in cur.fetchall())
    parts = {
        "table": sql.Identifier(SANDBOX_SCHEMA, table),
        "undo": sql.Identifier(STAGE_SCHEMA, undo_name(run_id, step_name)),
        "columns": columns,
    }
    params = {"run_id": str(uuid.UUID(str(run_id))), "step_id": step_name}
    cur.execute(sql.SQL(QUERIES["withdraw_merge_rows"]).format(**parts), params)
    deleted = cur.fetchone()[0]
    cur.execute(sql.SQL(QUERIES["restore_merge_undo"]).format(**parts), params)
    cur.execute(sql.SQL(QUERIES["drop_staging"]).format(staging=parts["undo"]))
    return deleted


def settle_merge(conn: Connection, run_id: object, step_name: str) -> bool:
    """Drop the undo table of a merge step that succeeded (its publish stays), in its own
    sandbox transaction. True if there was one."""
    name = undo_name(run_id, step_name)
    with conn, conn.cursor() as cur:
        if get_relation(cur, STAGE_SCHEMA, name) is None:
            return False
        cur.execute(
            sql.SQL(QUERIES["drop_staging"]).format(staging=sql.Identifier(STAGE_SCHEMA, name))
        )
    return True
