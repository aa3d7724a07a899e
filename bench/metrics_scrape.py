"""`python -m bench.metrics_scrape [--runs 100000] [--steps 10] [--repeat 20]`: what a
`GET /metrics` scrape costs as the history grows, against the baseline of recomputing the
counters from the whole history (what a scrape did before migration 0009), in one run.

It builds a fresh database, then grows its history in two stages: 1% of `--runs` first, then
the rest (`--runs` x `--steps` step rows in all, one finished attempt per step, 20 pipelines).
Each run, step and attempt is created and then moved to its final status by an UPDATE, so the
triggers append the deltas exactly as in production; the sweep's fold then folds them. At
each stage it times `--repeat` scrapes (the collector and the text encoding, in process: the
work of one worker answering `/metrics`) and the baseline queries over the same database,
and prints the median with its range. Not a test: nothing asserts."""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg2
from prometheus_client import CollectorRegistry, generate_latest

import ddl
from actors import fold_metric_deltas
from service.domain.db import Database
from service.domain.metrics import DatabaseCollector

PG = "postgresql://postgres@127.0.0.1:5432"
DB = "etl_bench_metrics"
PIPELINES = 20

# The counters as a scrape computed them from the history before migration 0009.
BASELINE = (
    "SELECT status, count(*) FROM runs GROUP BY status",
    "SELECT reason, count(*) FROM runs WHERE status = 'skipped' GROUP BY reason",
    "SELECT outcome, count(*) FROM attempts WHERE outcome IS NOT NULL GROUP BY outcome",
    "SELECT split_part(coalesce(a.lease_owner, a.executor, ''), ':', 1), count(*)"
    " FROM attempts a WHERE a.outcome = 'lease_expired' AND EXISTS (SELECT 1 FROM attempts b"
    " WHERE b.run_id = a.run_id AND b.step_name = a.step_name AND b.number > a.number)"
    " GROUP BY 1",
    "SELECT s.type, s.status, b.le, count(*) FILTER (WHERE s.seconds <= b.le)"
    " FROM (SELECT type, status, extract(epoch FROM finished_at - started_at)::float8 AS seconds"
    " FROM step_runs WHERE status IN ('succeeded', 'failed') AND started_at IS NOT NULL"
    " AND finished_at IS NOT NULL) s CROSS JOIN unnest('{0.1,0.5,1,2.5,5,10,30,60,300,900,3600}'"
    "::float8[]) AS b(le) GROUP BY s.type, s.status, b.le",
    "SELECT type, status, count(*), sum(extract(epoch FROM finished_at - started_at))"
    " FROM step_runs WHERE status IN ('succeeded', 'failed') GROUP BY type, status",
    "SELECT type, sum(records_in), sum(records_out), sum(rejected) FROM step_runs"
    " WHERE status = 'succeeded' GROUP BY type",
    "SELECT p.name, count(DISTINCT s.run_id) FROM step_runs s JOIN runs r ON r.id = s.run_id"
    " JOIN pipelines p ON p.id = r.pipeline_id WHERE s.status = 'failed'"
    " AND s.error LIKE 'stalled:%%' GROUP BY p.name",
)

GROW = """
WITH new AS (
    INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id, created_by,
                      created_at, started_at)
    SELECT gen_random_uuid(), (SELECT id FROM pipelines ORDER BY name OFFSET i %% {p} LIMIT 1),
           1, 'running', 'bench-' || i, 't', 'bench', now(), now() - interval '3 s'
    FROM generate_series(%(first)s, %(last)s) AS i
    RETURNING id
)
INSERT INTO step_runs (run_id, name, type, position, status, started_at)
SELECT new.id, 'step_' || k, CASE WHEN k = 0 THEN 'ingest' ELSE 'transform' END, k, 'running',
       now() - (k + 1) * interval '0.2 s'
FROM new, generate_series(0, %(steps)s - 1) AS k;
"""

FINISH = """
INSERT INTO attempts (run_id, step_name, number, executor, lease_owner, started_at)
SELECT run_id, name, 1, 'executor-1:b', 'executor-1:b', started_at
FROM step_runs WHERE status = 'running';
UPDATE attempts SET outcome = 'succeeded', finished_at = now() WHERE outcome IS NULL;
UPDATE step_runs SET status = 'succeeded', finished_at = now(), records_in = 500,
       records_out = 490, rejected = 10
WHERE status = 'running';
UPDATE runs SET status = CASE WHEN random() < 0.05 THEN 'failed' ELSE 'succeeded' END,
       finished_at = now()
WHERE status = 'running';
"""


def _fresh(url: str) -> None:
    admin = psycopg2.connect(f"{PG}/postgres")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin.close()
    ddl.migrate(url)
    conn = psycopg2.connect(url)
    with conn, conn.cursor() as cur:
        for i in range(PIPELINES):
            cur.execute(
                "INSERT INTO pipelines (id, name, revision) VALUES (gen_random_uuid(), %s, 1)"
                " RETURNING id",
                (f"pipeline_{i:02d}",),
            )
            (pid,) = cur.fetchone()
            cur.execute(
                "INSERT INTO revisions (pipeline_id, number, plan, created_by)"
                " VALUES (%s, 1, '{}', 'bench')",
                (pid,),
            )
    conn.close()


def _grow(url: str, first: int, last: int, steps: int) -> float:
    """Runs `first`..`last` with their steps and attempts, moved to their final status."""
    started = time.perf_counter()
    conn = psycopg2.connect(url)
    with conn, conn.cursor() as cur:
        cur.execute(GROW.format(p=PIPELINES), {"first": first, "last": last, "steps": steps})
        cur.execute(FINISH)
    fold_metric_deltas(conn)
    conn.close()
    vacuum = psycopg2.connect(url)
    vacuum.autocommit = True
    with vacuum.cursor() as cur:
        cur.execute("VACUUM ANALYZE")
    vacuum.close()
    return time.perf_counter() - started


def _median(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return f"{statistics.median(ms):8.1f} ms ({ms[0]:.1f} .. {ms[-1]:.1f})"


def _time_scrapes(url: str, repeat: int) -> tuple[list[float], int, int]:
    registry = CollectorRegistry(auto_describe=False)
    db = Database(url)
    registry.register(DatabaseCollector(db))
    times, size = [], 0
    generate_latest(registry)  # warm: connection, plans
    for _ in range(repeat):
        started = time.perf_counter()
        text = generate_latest(registry)
        times.append(time.perf_counter() - started)
        size = len(text)
    lines = sum(1 for line in text.decode().splitlines() if not line.startswith("#"))
    db.close()
    return times, size, lines


def _time_baseline(url: str, repeat: int) -> list[float]:
    conn = psycopg2.connect(url)
    times = []
    for _ in range(max(3, repeat // 4)):
        started = time.perf_counter()
        with conn.cursor() as cur:
            for query in BASELINE:
                cur.execute(query, {})
                cur.fetchall()
        conn.rollback()
        times.append(time.perf_counter() - started)
    conn.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    url = f"{PG}/{DB}"
    _fresh(url)
    print(f"{PIPELINES} pipelines, {args.steps} steps per run; medians of {args.repeat} scrapes")
    print(f"{'step rows':>10} | {'scrape (kept totals)':>30} | {'baseline (from history)':>30}")
    done = 0
    for upto in (max(1, args.runs // 100), args.runs):
        seconds = _grow(url, done + 1, upto, args.steps)
        done = upto
        scrapes, size, samples = _time_scrapes(url, args.repeat)
        baseline = _time_baseline(url, args.repeat)
        print(
            f"{done * args.steps:>10,} | {_median(scrapes):>30} | {_median(baseline):>30}"
            f"   ({samples} samples, {size / 1024:.0f} KiB; history grown in {seconds:.0f} s)"
        )


if __name__ == "__main__":
    main()
