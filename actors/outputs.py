"""Committed step output in PostgreSQL: batches of records as compressed JSON in `bytea`.

A batch is stored as zlib(`dag.encode_rows`): the JSON list of rows, each row a list of
values in column order, so column names are not repeated per record (faster to write than
jsonb: bench/README.md, "Figures behind design choices"). The same bytes are what the step's
output digest chains over, so they are encoded once per batch."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator

from actors.sql import QUERIES
from ddl import Cursor


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


def read_state_parts(conn, run_id: str, step: str, state) -> list[bytes]:
    """The parts of a computation's state that a checkpoint's `state` names (`{"parts": n}`:
    an aggregate's, `dag.Transform.checkpoint`), in order: stored with the batches'
    checkpoints as the step's batches -1, -2, ..., -n (output batches count from 0)."""
    count = state.get("parts", 0) if isinstance(state, dict) else 0
    if not count:
        return []
    with conn.cursor(cursor_factory=Cursor) as cur:
        cur.execute(QUERIES["read_state_parts"], {"run_id": run_id, "name": step, "low": -count})
        parts = [zlib.decompress(row["payload"]) for row in cur.fetchall()]
    conn.rollback()
    if len(parts) != count:
        raise LookupError(f"state of step {step!r}: {len(parts)} of its {count} parts stored")
    return parts


def read_batches(
    conn, run_id: str, step: str, *, start_seq: int, count: int
) -> Iterator[tuple[int, bytes]]:
    """Committed batches `start_seq..count-1` of a succeeded step, one at a time, as their
    `encode_rows` bytes."""
    for seq in range(start_seq, count):
        with conn.cursor(cursor_factory=Cursor) as cur:
            cur.execute(QUERIES["read_step_batch"], {"run_id": run_id, "name": step, "seq": seq})
            row = cur.fetchone()
        conn.rollback()  # read-only; do not hold a snapshot across batches
        if row is None:
            raise LookupError(f"output batch {seq} of step {step!r} is missing")
        yield seq, zlib.decompress(row["payload"])
