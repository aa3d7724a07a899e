"""Committed step output in PostgreSQL: batches of records as compressed JSON in `bytea`.

A batch is stored as zlib(`dag.encode_rows`): the JSON list of rows, each row a list of
values in column order, so column names are not repeated per record (faster to write than
jsonb: bench/README.md, "Figures behind design choices"). The same bytes are what the step's
output digest chains over, so they are encoded once per batch."""

from __future__ import annotations

import json
import weakref
import zlib
from collections.abc import Iterator
from typing import Any

from actors.errors import LeaseLost
from actors.sql import QUERIES


def decode_rows(rows: bytes, columns: dict[str, str]) -> list[dict]:
    """Records of one batch's `encode_rows` bytes, keyed by `columns` in order."""
    names = list(columns)
    return [dict(zip(names, row, strict=True)) for row in json.loads(rows)]


def columns_from_db(value) -> dict[str, str] | None:
    """`step_runs.columns` ([[name, type], ...]) as an ordered dict."""
    if value is None:
        return None
    return {name: typ for name, typ in value}


def columns_to_db(columns: dict[str, str] | None) -> str | None:
    return None if columns is None else json.dumps([[n, t] for n, t in columns.items()])


def write_batch(cur, run_id: str, step: str, seq: int, records: int, rows: bytes) -> None:
    """Store output batch `seq` (`records` records, `rows` = their `encode_rows` bytes)
    inside the caller's fenced transaction."""
    cur.execute(
        QUERIES["write_step_batch"],
        {
            "run_id": run_id,
            "name": step,
            "seq": seq,
            "records": records,
            "payload": zlib.compress(rows, 1),
        },
    )


def commit_batch(
    cur,
    run_id: str,
    fence: dict[str, Any],
    steps: list[tuple[int, dict[str, Any], int, int, bytes | None]],
) -> bool:
    """One batch's commit for a group's steps, in one statement of the caller's transaction
    (one round trip): each step's fence, output batch (none when its rows are None) and
    checkpoint; returns the run's cancel flag. Raises LeaseLost when a lease is no longer
    ours (the caller must roll back). `fence` holds owner and ttl_s; `steps` holds per step
    (attempt id, `Progress.values`, seq, records, rows)."""
    values, payloads = [], []
    for i, (attempt_id, progress, seq, records, rows) in enumerate(steps, start=1):
        values.append(
            {**progress, "attempt_id": attempt_id, "seq": seq, "n_records": records, "i": i}
        )
        payloads.append(None if rows is None else zlib.compress(rows, 1))
    params = {**fence, "run_id": run_id, "steps": json.dumps(values), "payloads": payloads}
    _prepare_commit_batch(cur)
    cur.execute(_EXECUTE_COMMIT_BATCH, params)
    row = cur.fetchone()
    if row is None:
        ids = [attempt_id for attempt_id, *_ in steps]
        raise LeaseLost(f"attempts {ids}: a lease is no longer held by {fence['owner']}")
    return bool(row[0])


# `commit_batch` runs once per batch: prepared once per session, it is planned once, not
# every time (planning took as long as running it: bench/README.md, "Figures behind design
# choices").
_COMMIT_BATCH_PARAMS = (("steps", "jsonb"), ("payloads", "bytea[]"), ("ttl_s", "float8"),
                        ("owner", "text"), ("run_id", "uuid"))  # fmt: skip
_EXECUTE_COMMIT_BATCH = "EXECUTE etl_commit_batch ({})".format(
    ", ".join(f"%({name})s" for name, _ in _COMMIT_BATCH_PARAMS)
)
_prepared: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # connection -> backend pid


def _prepare_commit_batch(cur) -> None:
    """PREPARE `commit_batch` in the cursor's session unless it is there already (a session
    keeps it across rollbacks; a new connection, or a new session behind it, prepares it
    again)."""
    conn = cur.connection
    pid = conn.info.backend_pid
    if _prepared.get(conn) == pid:
        return
    query = QUERIES["commit_batch"]
    for number, (name, _) in enumerate(_COMMIT_BATCH_PARAMS, start=1):
        query = query.replace(f"%({name})s", f"${number}")
    types = ", ".join(kind for _, kind in _COMMIT_BATCH_PARAMS)
    cur.execute(f"PREPARE etl_commit_batch ({types}) AS {query}")
    _prepared[conn] = pid


def read_batches(
    conn, run_id: str, step: str, *, start_seq: int, count: int
) -> Iterator[tuple[int, bytes]]:
    """Committed batches `start_seq..count-1` of a succeeded step, one at a time, as their
    `encode_rows` bytes."""
    for seq in range(start_seq, count):
        with conn.cursor() as cur:
            cur.execute(QUERIES["read_step_batch"], {"run_id": run_id, "name": step, "seq": seq})
            row = cur.fetchone()
        conn.rollback()  # read-only; do not hold a snapshot across batches
        if row is None:
            raise LookupError(f"output batch {seq} of step {step!r} is missing")
        yield seq, zlib.decompress(row[0])
