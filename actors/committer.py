"""A batch's one transaction, sent while the executor computes the next batch.

Every batch of a group ends in ONE transaction: each member's fence, output batch and
checkpoint (`commit_batch`), and the rows its table exports stage (`StagedRows`, when the
sandbox is the state database). The committer sends that transaction as one query on a
session of its own (an asynchronous connection: the server commits a query of several
statements as one implicit transaction) and returns at once; the executor computes the next
batch meanwhile, and the next commit first waits for this one and raises its error there.
So at most one batch is in flight, the batches commit in order, and what a batch stages
commits with its checkpoint or not at all.

Without a session of its own (`connect` None), a commit runs on the caller's connection and
waits for its answer: the same transaction, nothing in flight."""

from __future__ import annotations

import json
import weakref
import zlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import orjson
import psycopg2

from actors.errors import LeaseLost, StagingRefused
from actors.sql import QUERIES
from ddl import connection_lost, wait

# SQLSTATE of `etl_lease_lost` (migration 0015): a fence of the batch did not hold.
LEASE_LOST_SQLSTATE = "EL001"
# invalid_sql_statement_name: the session has no prepared statement of that name.
UNPREPARED_SQLSTATE = "26000"


class StagedRows(NamedTuple):
    """A table export's rows of one batch, to be staged in the batch's transaction: a
    statement and its parameters."""

    query: str
    params: dict[str, Any]


class StepCommit(NamedTuple):
    """One member's part of a batch's commit: its attempt, its `Progress.values`, the seq
    and record count of its output batch and that batch's `encode_rows` bytes (None: not
    stored)."""

    attempt_id: int
    progress: dict[str, Any]
    seq: int
    records: int
    rows: bytes | None


class BatchCommitter:
    """Commits a group's batches, each in one transaction, the last one possibly still in
    flight (see the module). `connect` opens its asynchronous session (`ddl.connect` with
    `asynchronous=True`); None: every commit waits on the caller's connection."""

    def __init__(self, connect: Callable[[], Any] | None):
        self._connect = connect
        self._conn: Any = None
        self._cursor: Any = None  # the cursor of the batch in flight (its answer comes there)
        self._staging = False  # the batch in flight stages table rows
        self._raised: BaseException | None = None  # what the last `wait` raised
        self._sent: tuple[dict[str, Any], Sequence[StagedRows]] = ({}, ())  # that batch
        # `commit_batch` written out in every query, not prepared: a prepared one went
        # missing (a transaction pooler between the committer and the server)
        self._plain = False

    def commit(
        self,
        conn: Any,
        run_id: str,
        fence: dict[str, Any],
        steps: Sequence[StepCommit],
        staged: Sequence[StagedRows] = (),
    ) -> bool:
        """Commit one batch: its `staged` rows, then each of `steps` behind its fence
        (`fence` holds owner and ttl_s). First waits for the batch in flight, raising its
        error (`LeaseLost`, `StagingRefused`, a lost session); then sends this one and,
        without a session of its own, waits for it on `conn`. Returns True when a commit
        that finished here saw the run's cancel flag.

        Everything the query needs is encoded before this returns: the caller may change
        its progress at once."""
        cancel = self.wait()
        params = _commit_params(run_id, fence, steps)
        if self._connect is None:
            with conn.cursor() as cur:
                try:
                    cancel = self._commit_here(cur, params, staged) or cancel
                except psycopg2.Error as exc:
                    error = _converted(exc, bool(staged))
                    if error is exc:
                        raise
                    raise error from exc
            conn.commit()
            return cancel
        cur = self._session().cursor()
        try:
            cur.execute(_query(cur, params, staged, self._plain))
        except BaseException as exc:
            self._lost(exc)
            raise
        self._cursor, self._staging, self._sent = cur, bool(staged), (params, staged)
        return cancel

    def _commit_here(self, cur, params: dict[str, Any], staged: Sequence[StagedRows]) -> bool:
        """The batch's query on the caller's connection, prepared `commit_batch` first."""
        if not self._plain:
            _prepare_commit_batch(cur)
            try:
                cur.execute(_query(cur, params, staged, False))
                return bool(cur.fetchone()[0])
            except psycopg2.Error as exc:
                if exc.pgcode != UNPREPARED_SQLSTATE:
                    raise
                cur.connection.rollback()  # nothing of the batch committed
                self._plain = True
        cur.execute(_query(cur, params, staged, True))
        return bool(cur.fetchone()[0])

    def wait(self) -> bool:
        """Wait for the batch in flight, if any: True when it saw the run's cancel flag;
        raises its error."""
        cur, self._cursor = self._cursor, None
        if cur is None:
            return False
        try:
            return self._answer(cur)
        except BaseException as exc:
            self._lost(exc)
            error = _converted(exc, self._staging) if isinstance(exc, psycopg2.Error) else exc
            self._raised = error
            if error is exc:
                raise
            raise error from exc

    def _answer(self, cur) -> bool:
        """The answer of the batch in flight on `cur`. A batch that met a session without
        the prepared `commit_batch` (a transaction pooler, PgBouncer's `pool_mode =
        transaction`, sent it to another server session) committed nothing, its query being
        one transaction: it is sent again with the statement written out, as every later
        batch of this committer, and waited for."""
        try:
            wait(self._conn)
            with cur:
                return bool(cur.fetchone()[0])
        except psycopg2.Error as exc:
            if exc.pgcode != UNPREPARED_SQLSTATE or self._plain:
                raise
        self._plain = True
        with self._conn.cursor() as again:
            again.execute(_query(again, *self._sent, True))
            wait(self._conn)
            return bool(again.fetchone()[0])

    def raised(self, exc: BaseException) -> bool:
        """Whether `exc` is the error of a batch in flight that `wait` raised (the
        attempt's, whoever waited for it)."""
        return exc is self._raised

    def settle(self) -> None:
        """Wait for the batch in flight and forget its error: for a caller that is failing
        anyway, or about to die, and must know nothing of ours is still on its way."""
        try:
            self.wait()
        except Exception:
            pass

    def close(self) -> None:
        """Close the session of its own, if open (after `settle`)."""
        if self._conn is not None:
            self._conn.close()
        self._conn, self._cursor = None, None

    def _session(self) -> Any:
        if self._conn is None or self._conn.closed:
            conn = self._connect()
            try:
                if not self._plain:  # behind a pooler the statement is written out instead
                    with conn.cursor() as cur:
                        cur.execute(_prepare_statement())
                    wait(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _lost(self, exc: BaseException) -> None:
        """A session that is gone, or left mid-query by an interruption, is closed (the
        next commit opens a new one); a statement's error leaves it usable."""
        if connection_lost(exc) or not isinstance(exc, psycopg2.Error):
            self.close()


def _query(cur, params: dict[str, Any], staged: Sequence[StagedRows], plain: bool) -> bytes:
    """The batch's one query: the staging inserts, then the fenced commit (the prepared
    `commit_batch`, or with `plain` the statement itself)."""
    parts = [cur.mogrify(query, values) for query, values in staged]
    commit = QUERIES["commit_batch"] if plain else _EXECUTE_COMMIT_BATCH
    return b";\n".join([*parts, cur.mogrify(commit, params)])


def _converted(exc: psycopg2.Error, staging: bool) -> Exception:
    """The driver's error of a batch's commit as the engine's, or itself. Any error of a
    commit that stages table rows, but a fence that did not hold or a lost session, is
    `StagingRefused`: the batch is computed again and staged by the table export's own
    path, which reports a key staged by another batch or a value that does not fit as row
    errors and raises any other staging error (a row too big, say) as its export step's,
    so the step that fails is that one, not the batch's group."""
    if exc.pgcode == LEASE_LOST_SQLSTATE:
        return LeaseLost(str(exc.diag.message_primary or exc))
    if staging and not connection_lost(exc):
        why = exc.diag.message_primary or str(exc).strip()
        return StagingRefused(f"a batch's staging rows were refused: {why}")
    return exc


def _commit_params(run_id: str, fence: dict[str, Any], steps: Sequence[StepCommit]) -> dict:
    values, payloads = [], []
    for i, (attempt_id, progress, seq, records, rows) in enumerate(steps, start=1):
        values.append(
            {**progress, "attempt_id": attempt_id, "seq": seq, "n_records": records, "i": i}
        )
        payloads.append(None if rows is None else zlib.compress(rows, 1))
    try:
        steps_json = orjson.dumps(values).decode()
    except TypeError:  # what orjson refuses (an int beyond 64 bits in a row error's raw)
        steps_json = json.dumps(values)
    return {**fence, "run_id": run_id, "steps": steps_json, "payloads": payloads}


# `commit_batch` runs once per batch: prepared once per session, it is planned once, not
# every time (planning took as long as running it: bench/README.md, "Figures behind design
# choices").
_COMMIT_BATCH_PARAMS = (("steps", "jsonb"), ("payloads", "bytea[]"), ("ttl_s", "float8"),
                        ("owner", "text"), ("run_id", "uuid"))  # fmt: skip
_EXECUTE_COMMIT_BATCH = "EXECUTE etl_commit_batch ({})".format(
    ", ".join(f"%({name})s" for name, _ in _COMMIT_BATCH_PARAMS)
)
_prepared: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # connection -> backend pid


def _prepare_statement() -> str:
    query = QUERIES["commit_batch"]
    for number, (name, _) in enumerate(_COMMIT_BATCH_PARAMS, start=1):
        query = query.replace(f"%({name})s", f"${number}")
    types = ", ".join(kind for _, kind in _COMMIT_BATCH_PARAMS)
    return f"PREPARE etl_commit_batch ({types}) AS {query}"


def _prepare_commit_batch(cur) -> None:
    """PREPARE `commit_batch` in the cursor's session unless it is there already (a session
    keeps it across rollbacks; a new connection, or a new session behind it, prepares it
    again)."""
    conn = cur.connection
    pid = conn.info.backend_pid
    if _prepared.get(conn) == pid:
        return
    cur.execute(_prepare_statement())
    _prepared[conn] = pid
