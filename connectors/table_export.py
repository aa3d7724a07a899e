"""The staged table export: the rows of one step of one run, staged in the PostgreSQL sandbox
and published into `sandbox.NAME` when the step commits. Names follow `connectors.sandbox`;
records are encoded by `connectors.export_encoding`.

Export, invisible until commit and exactly once under crashes:
- each batch is staged into the step's private staging table `etl_stage.s_<hash of run and
  step>` (`record_key`, plus the batch seq) in one sandbox transaction: in the batch's commit
  (`deferred_batch`), or by the export's own write path (`write_batch`: COPYed into a
  temporary table and upserted). Re-writing a batch after a crash updates the same rows;
- with a key, `record_key` is the staging table's primary key. Without one (record keys are
  the ordinals, unique by construction) the table starts without an index: a batch staged
  in its commit commits with its checkpoint, so it is never staged twice. The write path
  first creates the unique index if missing, in each of its transactions, so from its
  first write on a batch staged again is absorbed, and one staged in a commit again is
  refused, as with a key;
- a key staged by a *different* batch is a duplicate key: reported as a row error, never
  overwritten (the upsert's `WHERE batch_seq = EXCLUDED.batch_seq` guards it, race-free);
- `publish()` moves the staged rows into `sandbox.NAME` as the export's mode says
  (`connectors.export_modes`: `append` inserts them as the run's copy, `merge` upserts them
  on `record_key`) and drops the staging table in ONE transaction, so readers of
  `sandbox.NAME` see none of the step's rows, then all of them;
- the step's committed counters are the truth: an attempt that goes on from a checkpoint
  first checks the staging table still holds every committed row, and publish makes exactly
  the committed number of rows visible or nothing (`StagingLost`, the step starts over). A
  staging table that is gone where the mode finds its publish done (`append`:
  `sandbox.NAME` holds exactly the step's rows; `merge`: the step's undo table exists)
  means publish already happened (a retry of the step's last transaction): a no-op."""

from __future__ import annotations

import io
import uuid
from collections.abc import Mapping
from typing import Any

import psycopg2
import psycopg2.errors
from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from connectors.commit_staging import CommitStaging
from connectors.empty_publish import drop_key_when_empty
from connectors.errors import StagingLost
from connectors.export_columns import (
    BATCH_SEQ_COLUMN,
    EXPORT_TYPES,
    check_export_columns,
    fit_export_table,
)
from connectors.export_encoding import (
    csv_text,
    duplicate_key_error,
    encode_batch,
    record_keys,
    screen_export_batch,
)
from connectors.export_modes import EXPORT_MODES, AppendMode, MergeMode
from connectors.merge_undo import undo_name
from connectors.sandbox import (
    SANDBOX_SCHEMA,
    STAGE_SCHEMA,
    check_table_name,
    export_lock_key,
    get_relation,
    step_digest,
)
from connectors.sql import QUERIES
from dag.records import RowError


class TableExport:
    """The export of one step of one run into `sandbox.<table>`, staged until `publish()`.

    `conn` is a sandbox connection (not autocommit) used by this export alone; every method
    is one sandbox transaction. Call `prepare()` at the start of every attempt; a step that
    starts over calls `discard()` first. `mode` and `deleted` are the export's
    `config.mode` and `config.deleted` (merge: the column whose non-null value deletes the
    record's key)."""

    def __init__(
        self,
        conn: Connection,
        table: str,
        run_id: object,
        step_name: str,
        columns: Mapping[str, str],
        key_column: str | None = None,
        mode: str = "append",
        deleted: str | None = None,
    ):
        if conn.autocommit:
            raise ValueError("TableExport needs a connection with autocommit off")
        self._conn = conn
        self.table = check_table_name(table)
        self.run_id = str(uuid.UUID(str(run_id)))
        self.step_name = step_name
        self.columns = check_export_columns(columns, key_column, deleted)
        self.key_column = key_column
        self.mode: AppendMode | MergeMode = EXPORT_MODES[mode]
        digest = step_digest(self.run_id, step_name)
        self.staging_name = f"s_{digest}"
        self._staging = sql.Identifier(STAGE_SCHEMA, self.staging_name)
        self._keyless = key_column is None  # no index at creation (see the module)
        self._batch = sql.Identifier("pg_temp", f"b_{digest}")
        self._target = sql.Identifier(SANDBOX_SCHEMA, self.table)
        self._undo = sql.Identifier(STAGE_SCHEMA, undo_name(self.run_id, step_name))
        names = [sql.Identifier(c) for c in self.columns]
        self._column_defs = sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(c), EXPORT_TYPES[t][0])
            for c, t in self.columns.items()
        )
        self._user_columns = sql.SQL(", ").join(names)
        self._staged_columns = sql.SQL(", ").join([*names, sql.Identifier("record_key")])
        self._assignments = sql.SQL(", ").join(
            sql.SQL("{} = EXCLUDED.{}").format(n, n) for n in names
        )
        self._deleted = (
            sql.SQL("s.{} IS NOT NULL").format(sql.Identifier(deleted))
            if deleted
            else sql.SQL("FALSE")
        )
        self._in_commit: CommitStaging | None = None  # `deferred_batch`'s statements

    def prepare(self) -> None:
        """Create `sandbox.<table>` if missing (else check it fits: a missing column is
        added, a type conflict is `TableConflict`) and the staging table if missing."""
        with self._conn, self._conn.cursor() as cur:
            cur.execute(QUERIES["lock_export_table"], {"lock_key": export_lock_key(self.table)})
            relation = get_relation(cur, SANDBOX_SCHEMA, self.table)
            if relation is None:
                cur.execute(
                    sql.SQL(QUERIES[self.mode.create_query]).format(
                        table=self._target, column_defs=self._column_defs
                    )
                )
            else:
                fit_export_table(cur, self.table, self.columns, self.mode, *relation)
            cur.execute(
                sql.SQL(QUERIES["create_staging_table"]).format(
                    staging=self._staging,
                    column_defs=self._column_defs,
                    key=sql.SQL("NOT NULL" if self._keyless else "PRIMARY KEY"),
                    batch_seq=sql.Identifier(BATCH_SEQ_COLUMN),
                )
            )

    def check_staged(self, n_batches: int, rows: int) -> bool:
        """Before an attempt goes on from a checkpoint after `n_batches` batches that staged
        `rows` rows: False when the staging table holds exactly those rows; True when it
        is gone because they were published (as the mode finds it: an attempt that died
        between its publish and its step's final commit); else `StagingLost`."""
        if n_batches == 0:
            return False
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
            if not self._unpublished(rows):
                return True
        if staged != rows:
            found = "is gone" if staged is None else f"holds {staged}"
            raise StagingLost(
                f"staging table {STAGE_SCHEMA}.{self.staging_name} of step {self.step_name!r}"
                f" {found} where {n_batches} committed batch(es) staged {rows} row(s)"
            )
        return False

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
            lines = [f"{fields},{csv_text(key)}\n" for key, (_, _, fields) in staged.items()]
            written = self._stage(seq, io.StringIO("".join(lines)))
            for record_key, (ordinal, record, _) in staged.items():
                if record_key not in written:
                    errors.append(
                        duplicate_key_error(self.key_column, record_key, ordinal, record, None)
                    )
        errors.sort(key=lambda e: e.record or 0)
        return errors

    def deferred_batch(
        self, seq: int, records: list[Mapping[str, Any]], first_ordinal: int
    ) -> tuple[str, dict[str, Any]] | None:
        """Batch `seq` as a statement and its parameters that stage it inside another
        transaction on the sandbox database (a batch's commit), or None when this batch is
        for `write_batch`: a key that is null or repeated within it, a value JSON cannot
        carry as PostgreSQL reads it (a NUL, a lone surrogate, an int beyond 64 bits). The
        statement fails as a whole on a key another batch staged or a value that does not
        fit its column; the caller then stages the batch by `write_batch`, which reports
        them as row errors."""
        keys = record_keys(self.key_column, records, first_ordinal)
        if keys is None or not records:
            return None
        if self._in_commit is None:
            batch_seq = sql.Identifier(BATCH_SEQ_COLUMN)
            self._in_commit = CommitStaging(self._conn, self._staging, self.columns, batch_seq)
        return self._in_commit.statement(seq, records, keys)

    def publish(self, n_batches: int | None = None, rows: int | None = None) -> int:
        """Move the staged rows (of batches `< n_batches`, or all) into `sandbox.<table>`
        and drop the staging table, in one transaction; return the rows published.

        With `rows` (the step's committed count), anything but exactly that many rows made
        visible is refused (`StagingLost`, nothing published); a staging table that is gone
        is a no-op only when `sandbox.<table>` holds exactly that many rows of this run and
        step (publish already happened, as the mode finds it), else `StagingLost`. Without
        `rows`, a missing staging table is a no-op returning 0. The mode's statements run
        in order; a unique violation sends it to its next way, if any. A way the mode lists in
        `rebuilds` builds an empty table's primary key after its rows
        (`connectors.empty_publish`)."""
        last = len(self.mode.publishes) - 1
        for i, queries in enumerate(self.mode.publishes):
            try:
                return self._publish(queries, n_batches, rows, rebuild=i in self.mode.rebuilds)
            except psycopg2.errors.UniqueViolation:
                if i == last:
                    raise
        raise AssertionError("unreachable")

    def _publish(
        self, queries: tuple[str, ...], n_batches: int | None, rows: int | None, rebuild: bool
    ) -> int:
        conn = self._conn
        try:
            with conn.cursor() as cur:
                try:
                    cur.execute(sql.SQL(QUERIES["lock_staging"]).format(staging=self._staging))
                except psycopg2.errors.UndefinedTable:
                    conn.rollback()
                    return self._published_before(rows)
                parts = {
                    "table": self._target,
                    "columns": self._user_columns,
                    "staging": self._staging,
                    "batch_seq": sql.Identifier(BATCH_SEQ_COLUMN),
                    "assignments": self._assignments,
                    "undo": self._undo,
                    "deleted": self._deleted,
                }
                params = {
                    "run_id": self.run_id,
                    "step_id": self.step_name,
                    "n_batches": n_batches,
                    "lock_key": export_lock_key(self.table),
                }
                key = drop_key_when_empty(cur, self.table) if rebuild else None
                for query in queries:
                    cur.execute(sql.SQL(QUERIES[query]).format(**parts), params)
                published = cur.fetchone()[0] if cur.description else cur.rowcount
                if rows is not None and published != rows:
                    raise StagingLost(
                        f"publish of step {self.step_name!r} into {SANDBOX_SCHEMA}.{self.table}"
                        f" refused: the staging table holds {published} row(s) of the"
                        f" committed batches, the step committed {rows}"
                    )
                if key is not None:
                    key.restore(cur)
                cur.execute(sql.SQL(QUERIES["drop_staging"]).format(staging=self._staging))
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        return published

    def _published_before(self, rows: int | None) -> int:
        """The staging table is gone: publish already happened if the mode finds it done (0
        when `rows` is not given), else `StagingLost`."""
        if rows is None:
            return 0
        why = self._unpublished(rows)
        if why is not None:
            raise StagingLost(
                f"staging table {STAGE_SCHEMA}.{self.staging_name} of step {self.step_name!r}"
                f" is gone and {why}"
            )
        return 0

    def _unpublished(self, rows: int) -> str | None:
        return self.mode.unpublished(self._conn, self.table, self.run_id, self.step_name, rows)

    def discard(self) -> None:
        """Drop the staging table (an uncommitted or abandoned step); `sandbox.<table>` is
        left alone."""
        with self._conn, self._conn.cursor() as cur:
            cur.execute(sql.SQL(QUERIES["drop_staging"]).format(staging=self._staging))

    def _encode_batch(
        self, records: list[Mapping[str, Any]], first_ordinal: int, seq: int | None
    ) -> tuple[io.StringIO, list[str]] | None:
        """`encode_batch` of this export's columns and key column."""
        return encode_batch(self.columns, self.key_column, records, first_ordinal, seq)

    def _copy_staging(self, buf: io.StringIO) -> None:
        """The happy path of `write_batch`: COPY a batch encoded with its seq straight into
        staging, in one transaction. Raises UniqueViolation (nothing written) when a key is
        staged already: the same batch written before a crash, or another batch's key; the
        caller then upserts through the batch table, which tells the two apart."""
        buf.seek(0)
        with self._conn, self._conn.cursor() as cur:
            self._index_staging(cur)
            copy = sql.SQL(QUERIES["copy_staging"]).format(
                staging=self._staging,
                columns=self._staged_columns,
                batch_seq=sql.Identifier(BATCH_SEQ_COLUMN),
            )
            cur.copy_expert(copy.as_string(cur), buf)

    def _index_staging(self, cur: Any) -> None:
        """First in a write-path transaction: a key-less export's index, if missing."""
        if self._keyless:
            ix = sql.Identifier(f"{self.staging_name}_key")
            cur.execute(sql.SQL(QUERIES["index_staging"]).format(staging=self._staging, index=ix))

    def _stage(self, seq: int, buf: io.StringIO, *, copy_query: str = "copy_batch") -> set[str]:
        """COPY the encoded batch into a temporary table and upsert it into staging; the
        record keys written (those another batch staged are not)."""
        buf.seek(0)
        with self._conn, self._conn.cursor() as cur:
            self._index_staging(cur)
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


def drop_staging(conn: Connection, run_id: object, step_name: str) -> bool:
    """Drop the staging table a table export of `step_name` in `run_id` left behind (a step
    that failed or was abandoned before it published), in its own sandbox transaction.
    True if there was one. `sandbox.<table>` is left alone."""
    name = f"s_{step_digest(str(uuid.UUID(str(run_id))), step_name)}"
    with conn, conn.cursor() as cur:
        if get_relation(cur, STAGE_SCHEMA, name) is None:
            return False
        staging = sql.Identifier(STAGE_SCHEMA, name)
        cur.execute(sql.SQL(QUERIES["drop_staging"]).format(staging=staging))
    return True
