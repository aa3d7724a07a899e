"""The PostgreSQL sandbox: table ingest (catalog look-up, keyset pagination) and table export
(staged per run/step, published into `sandbox.NAME` when the step commits).

Every identifier goes through `psycopg2.sql.Identifier`; names users give are first checked
against a plain-name rule and then looked up in the catalog by exact name.

Export, invisible until commit and exactly once under crashes:
- each batch is COPYed into a temporary table and upserted into the step's private staging
  table `etl_stage.s_<hash of run and step>` (primary key `record_key`, plus the batch seq),
  in one sandbox transaction. Re-writing a batch after a crash updates the same rows;
- a key staged by a *different* batch is a duplicate key: reported as a row error, never
  overwritten (the upsert's `WHERE batch_seq = EXCLUDED.batch_seq` guards it, race-free);
- `publish()` moves the staged rows into `sandbox.NAME` (upsert on
  `(run_id, step_id, record_key)`) and drops the staging table in ONE transaction, so readers
  of `sandbox.NAME` see none of the step's rows, then all of them;
- the step's committed counters are the truth: an attempt that goes on from a checkpoint
  first checks the staging table still holds every committed row, and publish makes exactly
  the committed number of rows visible or nothing (`StagingLost`, the step starts over). A
  staging table that is gone while `sandbox.NAME` holds exactly the step's rows means
  publish already happened (a retry of the step's last transaction): a no-op.

Ingest type mapping (catalog base type -> column type): smallint/integer/bigint -> `int`;
date -> `date` (ISO string); every other type (text, varchar, char, uuid, numeric, real,
double precision, boolean, json, timestamps, arrays, ...) -> `string`, read as its PostgreSQL
text form (`::text`), which loses nothing and never refuses a table."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.errors
from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from connectors.errors import StagingLost, TableConflict, TableRefused
from connectors.sql import QUERIES
from dag.errors import ConfigValueError
from dag.limits import BATCH_SIZE, INT64_MAX, INT64_MIN
from dag.records import RowError
from dag.types import ISO_DATE_TEXT

SANDBOX_SCHEMA = "sandbox"
STAGE_SCHEMA = "etl_stage"
EXPORT_KEY_COLUMNS = ("run_id", "step_id", "record_key")
# The staging table's batch column; a name no step column may take.
BATCH_SEQ_COLUMN = "_etl_batch_seq"
RESERVED_COLUMNS = (*EXPORT_KEY_COLUMNS, BATCH_SEQ_COLUMN)

_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_IDENTIFIER_BYTES = 63  # PostgreSQL's NAMEDATALEN - 1: longer names are truncated
_INT_TYPES = frozenset({"int2", "int4", "int8"})
# Export column types: step type -> (DDL type, catalog base type names accepted as equal).
_EXPORT_TYPES: dict[str, tuple[sql.SQL, frozenset[str]]] = {
    "int": (sql.SQL("bigint"), frozenset({"int8"})),
    "string": (sql.SQL("text"), frozenset({"text", "varchar"})),
    "date": (sql.SQL("date"), frozenset({"date"})),
}
_RELKINDS = {
    "v": "a view",
    "m": "a materialized view",
    "f": "a foreign table",
    "S": "a sequence",
    "i": "an index",
    "I": "an index",
    "c": "a composite type",
}


@dataclass(frozen=True)
class SourceTable:
    """A sandbox table ingest may read: its columns (name -> int|string|date, in table
    order), its primary key (column names in key order) and the catalog types."""

    name: str
    columns: dict[str, str]
    key: list[str]
    pg_types: dict[str, str]


def check_table_name(name: object) -> str:
    """`name` if it is a plain table name (letters, digits, `_`; no schema, no quotes, at most
    63 bytes), else `TableRefused`."""
    if not isinstance(name, str) or not _TABLE_NAME.fullmatch(name):
        raise TableRefused(
            f"table name {name!r} is refused: use a plain name of letters, digits and '_' "
            f"of a table in schema {SANDBOX_SCHEMA!r}"
        )
    if len(name.encode("utf-8")) > _MAX_IDENTIFIER_BYTES:
        raise TableRefused(f"table name {name!r} is longer than 63 bytes")
    return name


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
        relation = _get_relation(cur, SANDBOX_SCHEMA, name)
        if relation is None:
            raise TableRefused(f"no table {name!r} in schema {SANDBOX_SCHEMA!r}")
        oid, relkind = relation
        if relkind not in ("r", "p"):
            what = _RELKINDS.get(relkind, "not a table")
            raise TableRefused(f"{SANDBOX_SCHEMA}.{name} is {what}, not a table")
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
    )


def read_table_batches(
    conn: Connection,
    source: SourceTable,
    *,
    after_key: list[Any] | None = None,
    batch_size: int = BATCH_SIZE,
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
    first = sql.SQL(QUERIES["read_first_batch"]).format(
        select_list=select_list, table=table, key=key
    )
    following = sql.SQL(QUERIES["read_next_batch"]).format(
        select_list=select_list,
        table=table,
        key=key,
        after=sql.SQL(", ").join(sql.Placeholder(p) for p in placeholders),
    )
    names = list(source.columns)
    types = [source.columns[c] for c in names]
    last_key = list(after_key) if after_key is not None else None
    while True:
        with conn, conn.cursor() as cur:
            if last_key is None:
                cur.execute(first, {"limit": batch_size})
            else:
                params = dict(zip(placeholders, last_key, strict=True))
                cur.execute(following, {"limit": batch_size, **params})
            rows = cur.fetchall()
        if not rows:
            return
        records = [_typed_record(names, types, row) for row in rows]
        last_key = [records[-1][k] for k in source.key]
        yield records, list(last_key)
        if len(rows) < batch_size:
            return


class TableExport:
    """The export of one step of one run into `sandbox.<table>`, staged until `publish()`.

    `conn` is a sandbox connection (not autocommit) used by this export alone; every method
    is one sandbox transaction. Call `prepare()` at the start of every attempt; a step that
    starts over calls `discard()` first."""

    def __init__(
        self,
        conn: Connection,
        table: str,
        run_id: object,
        step_name: str,
        columns: Mapping[str, str],
        key_column: str | None = None,
    ):
        if conn.autocommit:
            raise ValueError("TableExport needs a connection with autocommit off")
        self._conn = conn
        self.table = check_table_name(table)
        self.run_id = str(uuid.UUID(str(run_id)))
        self.step_name = step_name
        self.columns = check_export_columns(columns, key_column)
        self.key_column = key_column
        digest = _staging_digest(self.run_id, step_name)
        self.staging_name = f"s_{digest}"
        self._staging = sql.Identifier(STAGE_SCHEMA, self.staging_name)
        self._batch = sql.Identifier("pg_temp", f"b_{digest}")
        self._target = sql.Identifier(SANDBOX_SCHEMA, self.table)
        names = [sql.Identifier(c) for c in self.columns]
        self._column_defs = sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(c), _EXPORT_TYPES[t][0])
            for c, t in self.columns.items()
        )
        self._user_columns = sql.SQL(", ").join(names)
        self._staged_columns = sql.SQL(", ").join([*names, sql.Identifier("record_key")])
        self._assignments = sql.SQL(", ").join(
            sql.SQL("{} = EXCLUDED.{}").format(n, n) for n in names
        )

    def prepare(self) -> None:
        """Create `sandbox.<table>` if missing (else check it fits: a missing column is
        added, a type conflict is `TableConflict`) and the staging table if missing."""
        with self._conn, self._conn.cursor() as cur:
            cur.execute(QUERIES["lock_export_table"], {"lock_key": _lock_key(self.table)})
            relation = _get_relation(cur, SANDBOX_SCHEMA, self.table)
            if relation is None:
                cur.execute(
                    sql.SQL(QUERIES["create_export_table"]).format(
                        table=self._target, column_defs=self._column_defs
                    )
                )
            else:
                self._fit_export_table(cur, *relation)
            cur.execute(
                sql.SQL(QUERIES["create_staging_table"]).format(
                    staging=self._staging,
                    column_defs=self._column_defs,
                    batch_seq=sql.Identifier(BATCH_SEQ_COLUMN),
                )
            )

    def check_staged(self, n_batches: int, rows: int) -> None:
        """Before an attempt goes on from a checkpoint after `n_batches` batches that staged
        `rows` rows: `StagingLost` unless the staging table holds exactly those rows."""
        if n_batches == 0:
            return
        try:
            with self._conn, self._conn.cursor() as cur:
                cur.execute(
                    sql.SQL(QUERIES["count_staged_rows"]).format(
                        staging=self._staging, batch_seq=sql.Identifier(BATCH_SEQ_COLUMN)
                    ),
                    {"n_batches": n_batches},
                )
                staged = cur.fetchone()[0]
        except psycopg2.errors.UndefinedTable:
            staged = None
        if staged != rows:
            found = "is gone" if staged is None else f"holds {staged}"
            raise StagingLost(
                f"staging table {STAGE_SCHEMA}.{self.staging_name} of step {self.step_name!r}"
                f" {found} where {n_batches} committed batch(es) staged {rows} row(s)"
            )

    def write_batch(
        self, seq: int, records: list[Mapping[str, Any]], first_ordinal: int
    ) -> list[RowError]:
        """Stage batch `seq` (records with ordinals `first_ordinal`, `first_ordinal + 1`, ...)
        in one sandbox transaction and return its row errors, in record order: a null key, a
        key repeated within the batch or already staged by another batch (not written), a
        value that does not fit its column. Writing the same batch again replaces it.
        `StagingLost` when the staging table is gone (dropped under a running step)."""
        try:
            return self._write_batch(seq, records, first_ordinal)
        except psycopg2.errors.UndefinedTable as exc:
            raise StagingLost(
                f"staging table {STAGE_SCHEMA}.{self.staging_name} of step {self.step_name!r}"
                f" is gone while batch {seq} was written"
            ) from exc

    def _write_batch(
        self, seq: int, records: list[Mapping[str, Any]], first_ordinal: int
    ) -> list[RowError]:
        fast = self._encode_batch(records, first_ordinal, seq)
        if fast is not None:
            try:
                self._copy_staging(fast[0])
                return []
            except psycopg2.errors.UniqueViolation:
                pass  # this batch again after a crash, or a key another batch staged
            except psycopg2.DataError:
                fast = None  # a value that does not fit its column: see record by record
        if fast is not None:
            buf, keys = self._encode_batch(records, first_ordinal, None) or fast
            try:
                written = self._stage(seq, buf, copy_query="copy_batch_typed")
            except psycopg2.DataError:
                pass  # a value that does not fit its column: find it record by record below
            else:
                return [
                    duplicate_key_error(self.key_column, key, first_ordinal + i, records[i], None)
                    for i, key in enumerate(keys)
                    if key not in written
                ]
        staged, errors = screen_export_batch(self.columns, self.key_column, records, first_ordinal)
        if staged:
            lines = [f"{fields},{_csv_text(key)}\n" for key, (_, _, fields) in staged.items()]
            written = self._stage(seq, io.StringIO("".join(lines)))
            for record_key, (ordinal, record, _) in staged.items():
                if record_key not in written:
                    errors.append(
                        duplicate_key_error(self.key_column, record_key, ordinal, record, None)
                    )
        errors.sort(key=lambda e: e.record or 0)
        return errors

    def publish(self, n_batches: int | None = None, rows: int | None = None) -> int:
        """Move the staged rows (of batches `< n_batches`, or all) into `sandbox.<table>`
        and drop the staging table, in one transaction; return the rows published.

        With `rows` (the step's committed count), anything but exactly that many rows made
        visible is refused (`StagingLost`, nothing published); a staging table that is gone
        is a no-op only when `sandbox.<table>` holds exactly that many rows of this run and
        step (publish already happened), else `StagingLost`. Without `rows`, a missing
        staging table is a no-op returning 0.

        A plain INSERT: the run's rows are new (a new run is a new export, and a publish
        that committed dropped the staging table with it). Should a row of this run and
        step be there all the same, the unique violation undoes it and the upsert runs."""
        try:
            return self._publish("insert_staging", n_batches, rows)
        except psycopg2.errors.UniqueViolation:
            return self._publish("publish_staging", n_batches, rows)

    def _publish(self, query: str, n_batches: int | None, rows: int | None) -> int:
        conn = self._conn
        try:
            with conn.cursor() as cur:
                try:
                    cur.execute(sql.SQL(QUERIES["lock_staging"]).format(staging=self._staging))
                except psycopg2.errors.UndefinedTable:
                    conn.rollback()
                    return self._published_before(rows)
                cur.execute(
                    sql.SQL(QUERIES[query]).format(
                        table=self._target,
                        columns=self._user_columns,
                        staging=self._staging,
                        batch_seq=sql.Identifier(BATCH_SEQ_COLUMN),
                        assignments=self._assignments,
                    ),
                    {"run_id": self.run_id, "step_id": self.step_name, "n_batches": n_batches},
                )
                published = cur.rowcount
                if rows is not None and published != rows:
                    raise StagingLost(
                        f"publish of step {self.step_name!r} into {SANDBOX_SCHEMA}.{self.table}"
                        f" refused: the staging table holds {published} row(s) of the"
                        f" committed batches, the step committed {rows}"
                    )
                cur.execute(sql.SQL(QUERIES["drop_staging"]).format(staging=self._staging))
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        return published

    def _published_before(self, rows: int | None) -> int:
        """The staging table is gone: publish already happened if `sandbox.<table>` holds
        the step's rows (0 when `rows` is not given), else `StagingLost`."""
        if rows is None:
            return 0
        there = count_run_rows(self._conn, self.table, self.run_id, self.step_name) or 0
        self._conn.rollback()
        if there != rows:
            raise StagingLost(
                f"staging table {STAGE_SCHEMA}.{self.staging_name} of step {self.step_name!r}"
                f" is gone and {SANDBOX_SCHEMA}.{self.table} holds {there} of its {rows} row(s)"
            )
        return 0

    def discard(self) -> None:
        """Drop the staging table (an uncommitted or abandoned step); `sandbox.<table>` is
        left alone."""
        with self._conn, self._conn.cursor() as cur:
            cur.execute(sql.SQL(QUERIES["drop_staging"]).format(staging=self._staging))

    def _encode_batch(
        self, records: list[Mapping[str, Any]], first_ordinal: int, seq: int | None
    ) -> tuple[io.StringIO, list[str]] | None:
        """The fast path for the common case, typed records from the core with usable
        distinct keys: the whole batch encoded as `csv.writer` (QUOTE_NONNUMERIC) writes it,
        a column at a time (`_encode_column`) or, for a column of other values, by
        `csv.writer` itself, without checking values one by one (COPY refuses a value that
        does not fit, and the caller then takes the per-record path), with `seq` as the
        last field of every line unless it is None. None when a key is null or repeated in
        the batch."""
        if self.key_column is None:
            keys = [str(first_ordinal + i) for i in range(len(records))]
        else:
            raw = [r.get(self.key_column) for r in records]
            if None in raw:
                return None
            keys = [str(k) for k in raw]
            if len(set(keys)) != len(keys):
                return None
        columns = [[r.get(c) for r in records] for c in self.columns]
        fields = [_encode_column(values) for values in [*columns, keys]]
        if None not in fields:
            if seq is not None:
                fields.append([str(seq)] * len(records))
            lines = [*map(",".join, zip(*fields, strict=True)), ""]
            return io.StringIO("\n".join(lines)), keys
        buf = io.StringIO()
        writer = csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        tail = [] if seq is None else [seq]
        writer.writerows(
            [*[_NULL if v is None else v for v in row], key, *tail]
            for *row, key in zip(*columns, keys, strict=True)
        )
        return buf, keys

    def _copy_staging(self, buf: io.StringIO) -> None:
        """The happy path of `write_batch`: COPY a batch encoded with its seq straight into
        staging, in one transaction. Raises UniqueViolation (nothing written) when a key is
        staged already: the same batch written before a crash, or another batch's key; the
        caller then upserts through the batch table, which tells the two apart."""
        buf.seek(0)
        with self._conn, self._conn.cursor() as cur:
            copy = sql.SQL(QUERIES["copy_staging"]).format(
                staging=self._staging,
                columns=self._staged_columns,
                batch_seq=sql.Identifier(BATCH_SEQ_COLUMN),
            )
            cur.copy_expert(copy.as_string(cur), buf)

    def _stage(self, seq: int, buf: io.StringIO, *, copy_query: str = "copy_batch") -> set[str]:
        """COPY the encoded batch into a temporary table and upsert it into staging; the
        record keys written (those another batch staged are not)."""
        buf.seek(0)
        with self._conn, self._conn.cursor() as cur:
            cur.execute(
                sql.SQL(QUERIES["create_batch_table"]).format(
                    batch=self._batch, column_defs=self._column_defs
                )
            )
            copy = sql.SQL(QUERIES[copy_query]).format(
                batch=self._batch, columns=self._staged_columns
            )
            cur.copy_expert(copy.as_string(cur), buf)
            cur.execute(
                sql.SQL(QUERIES["upsert_staging"]).format(
                    staging=self._staging,
                    columns=self._staged_columns,
                    batch_seq=sql.Identifier(BATCH_SEQ_COLUMN),
                    batch=self._batch,
                    assignments=self._assignments,
                ),
                {"batch_seq": seq},
            )
            return {row[0] for row in cur.fetchall()}

    def _fit_export_table(self, cur: Any, oid: int, relkind: str) -> None:
        """Check an existing `sandbox.<table>` can take this step's rows; add missing columns."""
        name = f"{SANDBOX_SCHEMA}.{self.table}"
        if relkind not in ("r", "p"):
            raise TableConflict(f"{name} is {_RELKINDS.get(relkind, 'not a table')}")
        cur.execute(QUERIES["list_columns"], {"oid": oid})
        existing = {col: (base, fmt, notnull, hasdef) for col, base, fmt, notnull, hasdef in cur}
        cur.execute(QUERIES["list_primary_key"], {"oid": oid})
        key = [row[0] for row in cur.fetchall()]
        if sorted(key) != sorted(EXPORT_KEY_COLUMNS):
            raise TableConflict(
                f"{name} exists but its primary key is not (run_id, step_id, record_key)"
            )
        for col, base in (("run_id", "uuid"), ("step_id", "text"), ("record_key", "text")):
            if existing[col][0] != base:
                found = existing[col][1]
                raise TableConflict(f"{name}.{col} is {found}, expected {base}", column=col)
        for col, kind in self.columns.items():
            if col not in existing:
                cur.execute(
                    sql.SQL(QUERIES["add_export_column"]).format(
                        table=self._target,
                        column=sql.Identifier(col),
                        type=_EXPORT_TYPES[kind][0],
                    )
                )
            elif not _fits(kind, existing[col][0], existing[col][1]):
                raise TableConflict(
                    f"{name}.{col} is {existing[col][1]} but the step's column is {kind}",
                    column=col,
                )
        for col, (_, fmt, notnull, hasdef) in existing.items():
            if col not in self.columns and col not in EXPORT_KEY_COLUMNS and notnull and not hasdef:
                raise TableConflict(
                    f"{name}.{col} ({fmt}) is NOT NULL without a default and the step has no "
                    "such column",
                    column=col,
                )


def check_export_columns(
    columns: Mapping[str, str], key_column: str | None = None
) -> dict[str, str]:
    """The columns of a table export, checked (types, names PostgreSQL can hold, no clash
    with the export's own columns) and the key column among them; raises
    `ConfigValueError`/`TableConflict` like the engine's export does."""
    checked = _check_export_columns(columns)
    if key_column is not None and key_column not in checked:
        raise ConfigValueError(
            f"export key column {key_column!r} is not a column of the step's input",
            column=key_column,
        )
    return checked


def screen_export_batch(
    columns: Mapping[str, str],
    key_column: str | None,
    records: list[Mapping[str, Any]],
    first_ordinal: int,
) -> tuple[dict[str, tuple[int, Mapping[str, Any], str]], list[RowError]]:
    """One export batch before staging, without a database: the records it can stage by
    record key, as (ordinal, record, CSV fields), and the row errors of the others (a value
    that does not fit its column, a null key, a key repeated in the batch), in record order.
    The export and a preview both call it; only staging finds keys of earlier batches."""
    errors: list[RowError] = []
    staged: dict[str, tuple[int, Mapping[str, Any], str]] = {}
    for i, record in enumerate(records):
        ordinal = first_ordinal + i
        fields, problem = _encode_fields(columns, record)
        if problem is not None:
            errors.append(RowError(problem[1], record=ordinal, column=problem[0], raw=record))
            continue
        record_key = _record_key(key_column, record, ordinal)
        if record_key is None:
            reason = f"key column {key_column!r} is null"
            errors.append(RowError(reason, record=ordinal, column=key_column, raw=record))
            continue
        if record_key in staged:
            first = staged[record_key][0]
            errors.append(duplicate_key_error(key_column, record_key, ordinal, record, first))
            continue
        staged[record_key] = (ordinal, record, fields)
    return staged, errors


def duplicate_key_error(
    key_column: str | None,
    record_key: str,
    ordinal: int,
    record: Mapping[str, Any],
    first: int | None,
) -> RowError:
    """The row error of a record whose key record `first` of the batch (None: an earlier
    batch) already took."""
    where = f"record {first}" if first is not None else "an earlier batch"
    return RowError(
        f"duplicate key {record_key!r} in column {key_column!r}: already exported by "
        f"{where} of this step",
        record=ordinal,
        column=key_column,
        raw=record,
    )


def _record_key(key_column: str | None, record: Mapping[str, Any], ordinal: int) -> str | None:
    if key_column is None:
        return str(ordinal)
    value = record.get(key_column)
    return None if value is None else str(value)


def _encode_fields(
    columns: Mapping[str, str], record: Mapping[str, Any]
) -> tuple[str, None] | tuple[None, tuple[str, str]]:
    """The record's values as one CSV line (no key, no newline), or `(None, (column,
    reason))` for a value that does not fit its column."""
    fields = []
    for column, kind in columns.items():
        value = record.get(column)
        if value is None:
            fields.append("")
            continue
        problem = _check_value(kind, value)
        if problem is not None:
            return None, (column, problem)
        fields.append(str(value) if kind == "int" else _csv_text(value))
    return ",".join(fields), None


def drop_staging(conn: Connection, run_id: object, step_name: str) -> bool:
    """Drop the staging table a table export of `step_name` in `run_id` left behind (a step
    that failed or was abandoned before it published), in its own sandbox transaction.
    True if there was one. `sandbox.<table>` is left alone."""
    name = f"s_{_staging_digest(str(uuid.UUID(str(run_id))), step_name)}"
    with conn, conn.cursor() as cur:
        if _get_relation(cur, STAGE_SCHEMA, name) is None:
            return False
        staging = sql.Identifier(STAGE_SCHEMA, name)
        cur.execute(sql.SQL(QUERIES["drop_staging"]).format(staging=staging))
    return True


def count_run_rows(conn: Connection, table: str, run_id: object, step_name: str) -> int | None:
    """The rows `step_name` of `run_id` published into `sandbox.<table>`, in its own sandbox
    transaction; None when the table does not exist (nothing published yet)."""
    name = check_table_name(table)
    with conn, conn.cursor() as cur:
        if _get_relation(cur, SANDBOX_SCHEMA, name) is None:
            return None
        query = sql.SQL(QUERIES["count_run_rows"]).format(
            table=sql.Identifier(SANDBOX_SCHEMA, name)
        )
        cur.execute(query, {"run_id": str(uuid.UUID(str(run_id))), "step_id": step_name})
        return cur.fetchone()[0]


def _staging_digest(run_id: str, step_name: str) -> str:
    """Names a step's staging table and its per-session batch table."""
    return hashlib.sha256(f"{run_id}\x00{step_name}".encode()).hexdigest()[:40]


def _get_relation(cur: Any, schema: str, name: str) -> tuple[int, str] | None:
    cur.execute(QUERIES["get_relation"], {"schema": schema, "name": name})
    return cur.fetchone()


def _fits(kind: str, base_type: str, formatted: str) -> bool:
    """Whether an existing column (catalog base type, formatted type) takes `kind` values
    without loss or failure: a length limit (`varchar(n)`) could fail a publish."""
    return base_type in _EXPORT_TYPES[kind][1] and "(" not in formatted


def _typed_record(names: list[str], types: list[str], row: tuple[Any, ...]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for name, kind, value in zip(names, types, row, strict=True):
        if value is not None and kind == "date":
            value = value.isoformat()
        record[name] = value
    return record


def _check_export_columns(columns: Mapping[str, str]) -> dict[str, str]:
    if not columns:
        raise ConfigValueError("a table export needs at least one column")
    checked: dict[str, str] = {}
    for name, kind in columns.items():
        if kind not in _EXPORT_TYPES:
            raise ConfigValueError(f"column type {kind!r} cannot be exported", column=name)
        if not name or "\x00" in name or len(name.encode("utf-8")) > _MAX_IDENTIFIER_BYTES:
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


def _check_value(kind: str, value: Any) -> str | None:
    """Why `value` cannot be stored in a column of type `kind`, or None."""
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"value {value!r} is not an int"
        if not INT64_MIN <= value <= INT64_MAX:
            return f"value {value} is outside int64"
        return None
    if not isinstance(value, str):
        return f"value {value!r} is not a {kind}"
    if "\x00" in value:
        return "a NUL character cannot be stored in PostgreSQL text"
    if kind == "date":
        try:
            if not ISO_DATE_TEXT.fullmatch(value):
                raise ValueError(value)
            dt.date.fromisoformat(value)
        except ValueError:
            return f"value {value!r} is not an ISO date (YYYY-MM-DD)"
    return None


# How the fast path writes null: QUOTE_NONNUMERIC quotes every string and leaves numbers bare,
# so a NaN comes out as a bare `nan`, which COPY reads as NULL (`copy_batch_typed`); a text
# value "nan" is quoted and stays text. The core never produces floats of its own.
_NULL = float("nan")
_NULL_FIELD = str(_NULL)  # as csv.writer writes it: bare
_INT_OR_NULL = frozenset({int, type(None)})
_TEXT_OR_NULL = frozenset({str, type(None)})


def _encode_column(values: list[Any]) -> list[str] | None:
    """One column of a batch as the fields `csv.writer` writes for it in `_encode_batch`
    (text quoted, ints bare, null `_NULL`), by C-level string operations over the whole
    column instead of Python code per value; None when it holds anything else, or a NUL
    (the separator here; COPY refuses it anyway)."""
    kinds = set(map(type, values))
    if kinds <= _INT_OR_NULL:
        fields = list(map(str, values))
    elif kinds <= _TEXT_OR_NULL:
        texts = ["" if v is None else v for v in values] if type(None) in kinds else values
        joined = "\x00".join(texts)
        if joined.count("\x00") != len(values) - 1:
            return None
        fields = ('"' + joined.replace('"', '""').replace("\x00", '"\x00"') + '"').split("\x00")
    else:
        return None
    if type(None) in kinds:
        for i, value in enumerate(values):
            if value is None:
                fields[i] = _NULL_FIELD
    return fields


def _csv_text(value: str) -> str:
    # Always quoted: an unquoted empty field is NULL in COPY's CSV format, a quoted one is ''.
    return '"' + value.replace('"', '""') + '"'


def _lock_key(table: str) -> int:
    """A signed 64-bit advisory lock key for one export table."""
    digest = hashlib.sha256(f"etl-export:{table}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
