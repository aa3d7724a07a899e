"""`python -m bench.merge_1m`: a merge export of 100,000 changed keys into a 1,000,000-row
target (issue 34, target: within 2x of a hand-written upsert). Not a test: nothing here
asserts.

Each repetition builds two equal targets of 1,000,000 rows on a fresh database (untimed):
`sandbox.merge_target` in the merge export's shape, and `bench_merge_baseline` in the same
shape. Then, interleaved (the order alternates, so a change in the machine's load hits
both), the same 100,000 records (every tenth key, new values) are merged:
- platform: `connectors.TableExport` in `"mode": "merge"`: `prepare`, `write_batch` per
  500-record batch (each its own transaction, as the engine stages them), `publish` (undo
  image + upsert + dropping the staging table, one transaction);
- baseline: a staging table, one COPY per 500-record batch (each its own transaction), then
  one `INSERT .. SELECT .. ON CONFLICT (record_key) DO UPDATE` from it and its drop.

Prints the medians over `--repeat` runs (default 5) with their ranges: the whole merge and
the publish alone against the upsert statement alone, and their ratios."""

from __future__ import annotations

import argparse
import csv
import io
import statistics
import sys
import time
import uuid
from collections.abc import Callable

from connectors import TableExport
from ddl import connect
from ddl.migrate import create_database_if_missing, migrate
from drills.harness import drop_database

SERVER = "postgresql://postgres@127.0.0.1:5432"
DATABASE = f"{SERVER}/etl_bench_merge"
TARGET_ROWS = 1_000_000
CHANGED = 100_000
BATCH = 500
COLUMNS = {"id": "int", "name": "string", "amount": "int", "signup": "date"}
FILL = """
INSERT INTO {table} (id, name, amount, signup, run_id, step_id, record_key)
SELECT i, 'name ' || i, i %% 1000, date '2024-01-01' + (i %% 365),
       %(run_id)s::uuid, 'out', i::text
FROM generate_series(1, {rows}) AS i
"""
BASELINE_TABLE = """
DROP TABLE IF EXISTS bench_merge_baseline;
CREATE TABLE bench_merge_baseline (id bigint, name text, amount bigint, signup date,
    run_id uuid NOT NULL, step_id text NOT NULL, record_key text PRIMARY KEY)
"""
BASELINE_STAGING = """
DROP TABLE IF EXISTS bench_merge_staging;
CREATE TABLE bench_merge_staging (id bigint, name text, amount bigint, signup date,
    record_key text PRIMARY KEY)
"""
BASELINE_UPSERT = """
INSERT INTO bench_merge_baseline (id, name, amount, signup, run_id, step_id, record_key)
SELECT id, name, amount, signup, %(run_id)s::uuid, 'out', record_key FROM bench_merge_staging
ON CONFLICT (record_key) DO UPDATE SET id = EXCLUDED.id, name = EXCLUDED.name,
    amount = EXCLUDED.amount, signup = EXCLUDED.signup, run_id = EXCLUDED.run_id,
    step_id = EXCLUDED.step_id;
DROP TABLE bench_merge_staging
"""


def changed_records() -> list[dict]:
    """Every tenth key of the target with new values."""
    return [
        {"id": i, "name": f"changed {i}", "amount": i % 777, "signup": "2025-06-30"}
        for i in range(10, 10 * CHANGED + 1, 10)
    ]


def build_targets(conn) -> None:
    """Both 1,000,000-row targets, fresh (untimed)."""
    old = str(uuid.uuid4())
    with conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS sandbox.merge_target")
    TableExport(conn, "merge_target", old, "out", COLUMNS, "id", "merge").prepare()
    with conn, conn.cursor() as cur:
        cur.execute(FILL.format(table="sandbox.merge_target", rows=TARGET_ROWS), {"run_id": old})
        cur.execute(BASELINE_TABLE)
        cur.execute(FILL.format(table="bench_merge_baseline", rows=TARGET_ROWS), {"run_id": old})
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("VACUUM ANALYZE sandbox.merge_target")
        cur.execute("VACUUM ANALYZE bench_merge_baseline")
    conn.autocommit = False


def platform(conn, records: list[dict]) -> tuple[float, float]:
    """The merge export: (whole seconds, publish seconds)."""
    began = time.perf_counter()
    export = TableExport(conn, "merge_target", uuid.uuid4(), "out", COLUMNS, "id", "merge")
    export.prepare()
    batches = 0
    for start in range(0, len(records), BATCH):
        errors = export.write_batch(batches, records[start : start + BATCH], start + 1)
        assert not errors, errors[:3]
        batches += 1
    published = time.perf_counter()
    assert export.publish(batches, len(records)) == len(records)
    done = time.perf_counter()
    return done - began, done - published


def baseline(conn, records: list[dict]) -> tuple[float, float]:
    """The hand-written merge: (whole seconds, upsert seconds)."""
    began = time.perf_counter()
    with conn, conn.cursor() as cur:
        cur.execute(BASELINE_STAGING)
    for start in range(0, len(records), BATCH):
        buf = io.StringIO()
        writer = csv.writer(buf)
        for r in records[start : start + BATCH]:
            writer.writerow((r["id"], r["name"], r["amount"], r["signup"], r["id"]))
        buf.seek(0)
        with conn, conn.cursor() as cur:
            cur.copy_expert("COPY bench_merge_staging FROM STDIN WITH (FORMAT csv)", buf)
    upsert = time.perf_counter()
    with conn, conn.cursor() as cur:
        cur.execute(BASELINE_UPSERT, {"run_id": str(uuid.uuid4())})
        assert cur.rowcount == -1 or cur.rowcount >= 0
    done = time.perf_counter()
    return done - began, done - upsert


def check(conn) -> None:
    """Both targets hold the same rows but the writer ids."""
    query = "SELECT count(*), sum(amount), count(*) FILTER (WHERE name LIKE 'changed%%') FROM {}"
    with conn, conn.cursor() as cur:
        cur.execute(query.format("sandbox.merge_target"))
        ours = cur.fetchone()
        cur.execute(query.format("bench_merge_baseline"))
        theirs = cur.fetchone()
    assert ours == theirs == (TARGET_ROWS, ours[1], CHANGED), (ours, theirs)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f} .. {max(values):.2f})"


def ratios(ours: list[float], theirs: list[float]) -> str:
    r = [a / b for a, b in zip(ours, theirs, strict=True)]
    return f"{statistics.median(r):.2f}x ({min(r):.2f} .. {max(r):.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--database", default=DATABASE, help="dropped at the end if the default")
    args = parser.parse_args(argv)
    create_database_if_missing(args.database)
    migrate(args.database)
    conn = connect(args.database, "bench-merge")
    records = changed_records()
    figures: dict[str, list[float]] = {k: [] for k in ("ours", "publish", "theirs", "upsert")}
    runs: list[Callable] = [platform, baseline]
    for i in range(args.repeat):
        build_targets(conn)
        for run in runs if i % 2 == 0 else runs[::-1]:
            whole, part = run(conn, records)
            keys = ("ours", "publish") if run is platform else ("theirs", "upsert")
            figures[keys[0]].append(whole)
            figures[keys[1]].append(part)
        check(conn)
        print(f"run {i + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in figures.items()))
    conn.close()
    if args.database == DATABASE:
        drop_database(SERVER, DATABASE.rsplit("/", 1)[1])
    print(f"\n{CHANGED:,} changed keys merged into {TARGET_ROWS:,} rows, {args.repeat} runs")
    print("| figure | platform | baseline (same run) | ratio |")
    print("|---|---|---|---|")
    print(
        f"| staged per {BATCH} + published | {spread(figures['ours'])} |"
        f" {spread(figures['theirs'])} | **{ratios(figures['ours'], figures['theirs'])}** |"
    )
    print(
        f"| publish / upsert statement | {spread(figures['publish'])} |"
        f" {spread(figures['upsert'])} | {ratios(figures['publish'], figures['upsert'])} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
