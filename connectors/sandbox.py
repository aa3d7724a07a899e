"""The PostgreSQL sandbox's naming rules, shared by table ingest and table export.

Every identifier goes through `psycopg2.sql.Identifier`; names users give are first checked
against a plain-name rule (`check_table_name`) and then looked up in the catalog by exact
name (`get_relation`), so a name is never parsed, case-folded or searched for on a path."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from connectors.errors import TableRefused
from connectors.sql import QUERIES

SANDBOX_SCHEMA = "sandbox"
# PostgreSQL's NAMEDATALEN - 1: it silently truncates longer names, so they are refused.
MAX_IDENTIFIER_BYTES = 63

_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RELKINDS = {
    "v": "a view",
    "m": "a materialized view",
    "f": "a foreign table",
    "S": "a sequence",
    "i": "an index",
    "I": "an index",
    "c": "a composite type",
}


def check_table_name(name: object) -> str:
    """`name` if it is a plain table name (letters, digits, `_`; no schema, no quotes, at most
    63 bytes), else `TableRefused`."""
    if not isinstance(name, str) or not _TABLE_NAME.fullmatch(name):
        raise TableRefused(
            f"table name {name!r} is refused: use a plain name of letters, digits and '_' "
            f"of a table in schema {SANDBOX_SCHEMA!r}"
        )
    if len(name.encode("utf-8")) > MAX_IDENTIFIER_BYTES:
        raise TableRefused(f"table name {name!r} is longer than 63 bytes")
    return name


def get_relation(cur: Any, schema: str, name: str) -> tuple[int, str] | None:
    """The `(oid, relkind)` of the relation `schema.name` (exact name), or None, looked up on
    the caller's cursor, inside the caller's transaction."""
    cur.execute(QUERIES["get_relation"], {"schema": schema, "name": name})
    return cur.fetchone()


def is_table(relkind: str) -> bool:
    """Whether a relation kind is an ordinary or a partitioned table."""
    return relkind in ("r", "p")


def relation_kind(relkind: str) -> str:
    """A relation kind that is not a table, in words ("a view"), for refusals."""
    return _RELKINDS.get(relkind, "not a table")


STAGE_SCHEMA = "etl_stage"


def step_digest(run_id: str, step_name: str) -> str:
    """Names the tables of one step of one run in `STAGE_SCHEMA` (its staging table, a merge
    export's undo table) and its per-session batch table."""
    return hashlib.sha256(f"{run_id}\x00{step_name}".encode()).hexdigest()[:40]


def export_lock_key(table: str) -> int:
    """A signed 64-bit advisory lock key for one export table: its prepares, its merge
    publishes and their withdrawals take it in turn."""
    digest = hashlib.sha256(f"etl-export:{table}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
