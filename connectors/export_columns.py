"""The columns of a table export: which step columns an export table can take (types,
names PostgreSQL can hold, none clashing with the export's own columns), and whether an
existing `sandbox.NAME` fits a step's columns and the export's mode."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg2 import sql

from connectors.errors import TableConflict
from connectors.export_modes import EXPORT_MODES
from connectors.sandbox import MAX_IDENTIFIER_BYTES, SANDBOX_SCHEMA, is_table, relation_kind
from connectors.sql import QUERIES
from dag.errors import ConfigValueError

EXPORT_KEY_COLUMNS = ("run_id", "step_id", "record_key")
# The staging table's batch column; a name no step column may take.
BATCH_SEQ_COLUMN = "_etl_batch_seq"
RESERVED_COLUMNS = (*EXPORT_KEY_COLUMNS, BATCH_SEQ_COLUMN)

# Export column types: step type -> (DDL type, catalog base type names accepted as equal).
EXPORT_TYPES: dict[str, tuple[sql.SQL, frozenset[str]]] = {
    "int": (sql.SQL("bigint"), frozenset({"int8"})),
    "string": (sql.SQL("text"), frozenset({"text", "varchar"})),
    "date": (sql.SQL("date"), frozenset({"date"})),
}


def check_export_columns(
    columns: Mapping[str, str], key_column: str | None = None, deleted: str | None = None
) -> dict[str, str]:
    """The columns of a table export, checked (types, names PostgreSQL can hold, no clash
    with the export's own columns) and the key and delete columns among them; raises
    `ConfigValueError`/`TableConflict` like the engine's export does."""
    checked = _check_export_columns(columns)
    for what, name in (("key", key_column), ("delete", deleted)):
        if name is not None and name not in checked:
            raise ConfigValueError(
                f"export {what} column {name!r} is not a column of the step's input",
                column=name,
            )
    return checked


def fit_export_table(
    cur: Any, table: str, columns: Mapping[str, str], mode: Any, oid: int, relkind: str
) -> None:
    """Check an existing `sandbox.<table>` (relation `oid` of kind `relkind`) can take rows
    of `columns` in `mode` (its key); add the missing columns, on the caller's cursor and
    transaction."""
    name = f"{SANDBOX_SCHEMA}.{table}"
    if not is_table(relkind):
        raise TableConflict(f"{name} is {relation_kind(relkind)}")
    cur.execute(QUERIES["list_columns"], {"oid": oid})
    existing = {col: (base, fmt, notnull, hasdef) for col, base, fmt, notnull, hasdef in cur}
    cur.execute(QUERIES["list_primary_key"], {"oid": oid})
    key = [row[0] for row in cur.fetchall()]
    if sorted(key) != sorted(mode.key_columns):
        _refuse_key(name, key, mode)
    for col, base in (("run_id", "uuid"), ("step_id", "text"), ("record_key", "text")):
        if existing[col][0] != base:
            found = existing[col][1]
            raise TableConflict(f"{name}.{col} is {found}, expected {base}", column=col)
    for col, kind in columns.items():
        if col not in existing:
            cur.execute(
                sql.SQL(QUERIES["add_export_column"]).format(
                    table=sql.Identifier(SANDBOX_SCHEMA, table),
                    column=sql.Identifier(col),
                    type=EXPORT_TYPES[kind][0],
                )
            )
        elif not _fits(kind, existing[col][0], existing[col][1]):
            raise TableConflict(
                f"{name}.{col} is {existing[col][1]} but the step's column is {kind}",
                column=col,
            )
    for col, (_, fmt, notnull, hasdef) in existing.items():
        if col not in columns and col not in EXPORT_KEY_COLUMNS and notnull and not hasdef:
            raise TableConflict(
                f"{name}.{col} ({fmt}) is NOT NULL without a default and the step has no "
                "such column",
                column=col,
            )


def _fits(kind: str, base_type: str, formatted: str) -> bool:
    """Whether an existing column (catalog base type, formatted type) takes `kind` values
    without loss or failure: a length limit (`varchar(n)`) could fail a publish."""
    return base_type in EXPORT_TYPES[kind][1] and "(" not in formatted


def _check_export_columns(columns: Mapping[str, str]) -> dict[str, str]:
    if not columns:
        raise ConfigValueError("a table export needs at least one column")
    checked: dict[str, str] = {}
    for name, kind in columns.items():
        if kind not in EXPORT_TYPES:
            raise ConfigValueError(f"column type {kind!r} cannot be exported", column=name)
        if not name or "\x00" in name or len(name.encode("utf-8")) > MAX_IDENTIFIER_BYTES:
            raise TableConflict(
                f"column name {name!r} cannot be a PostgreSQL column (empty, NUL or over 63 bytes)",
                column=name,
            )
        if name in RESERVED_COLUMNS:
            raise TableConflict(
                f"column {name!r} clashes with the export table's own column", column=name
            )
        checked[name] = kind
    return checked


def _refuse_key(name: str, key: list[str], mode: Any) -> None:
    """`TableConflict` for an existing table keyed otherwise than `mode` needs: a table of
    the other mode never switches silently."""
    found = ", ".join(key) or "none"
    expected = ", ".join(mode.key_columns)
    shapes = {tuple(sorted(m.key_columns)): m.name for m in EXPORT_MODES.values()}
    other = shapes.get(tuple(sorted(key)))
    shape = f"an export table of mode {other!r}" if other else "a table"
    raise TableConflict(
        f'config.mode: {name} exists as {shape} (primary key {found}); "mode":'
        f' "{mode.name}" needs the primary key ({expected}): export into another table'
    )
