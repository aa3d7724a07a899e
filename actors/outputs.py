"""Committed step output in PostgreSQL: batches of records as compressed JSON in `bytea`.

A batch is stored as zlib(JSON list of rows), each row a list of values in column order, so
column names are not repeated per record (measured: ~2x faster than jsonb to write)."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator

from actors.sql import QUERIES


def encode_batch(records: list[dict], columns: dict[str, str]) -> bytes:
    """The stored form of one output batch."""
    names = list(columns)
    rows = [[r.get(n) for n in names] for r in records]
    return zlib.compress(json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode(), 1)


def decode_batch(payload: bytes, columns: dict[str, str]) -> list[dict]:
    """Records of one stored batch, keyed by `columns` in order."""
    names = list(columns)
    return [dict(zip(names, row, strict=True)) for row in json.loads(zlib.decompress(payload))]


def columns_from_db(value) -> dict[str, str] | None:
    """`step_runs.columns` ([[name, type], ...]) as an ordered dict."""
    if value is None:
        return None
    return {name: typ for name, typ in value}


def columns_to_db(columns: dict[str, str] | None) -> str | None:
    return None if columns is None else json.dumps([[n, t] for n, t in columns.items()])


def write_batch(cur, run_id: str, step: str, seq: int, records: list[dict], columns) -> None:
    """Store output batch `seq` (inside the caller's fenced transaction)."""
    cur.execute(
        QUERIES["write_step_batch"],
        {
            "run_id": run_id,
            "name": step,
            "seq": seq,
            "records": len(records),
            "payload": encode_batch(records, columns),
        },
    )


def read_batches(
    conn, run_id: str, step: str, columns: dict[str, str], *, start_seq: int, count: int
) -> Iterator[tuple[int, list[dict]]]:
    """Committed batches `start_seq..count-1` of a succeeded step, one at a time."""
    for seq in range(start_seq, count):
        with conn.cursor() as cur:
            cur.execute(QUERIES["read_step_batch"], {"run_id": run_id, "name": step, "seq": seq})
            row = cur.fetchone()
        conn.rollback()  # read-only; do not hold a snapshot across batches
        if row is None:
            raise LookupError(f"output batch {seq} of step {step!r} is missing")
        yield seq, decode_batch(bytes(row[0]), columns)
