"""`python -m bench.import_100k`: our pipeline against a raw psycopg2 baseline on the same
seeded 100,000-record CSV, plus orchestration overhead and trigger latency. Prints a table
of figures next to the COMPASS targets. Not a test: nothing here asserts.

- (a) pipeline: POST trigger -> run succeeded (ingest -> normalize_whitespace -> table
  export) through the API and two executors, production timings;
- (b) baseline: csv.reader + the same normalisation + COPY into a temp table and
  INSERT .. ON CONFLICT upsert in 500-record batches, a checkpoint row per commit;
- (c) their ratio; (d) peak RSS of each executor (/proc, VmHWM);
- (e) a 30-step chain of small transforms vs a 1-step run: (chain - one) / 29 per step;
- (f) trigger -> first attempt started, median of 50 (run.created_at and the attempt's
  started_at, both on the database clock).

`--profile` instead runs the 100k pipeline once with both executors under cProfile (every
thread) and prints where the time goes (see bench/README.md)."""

from __future__ import annotations

import argparse
import cProfile
import csv
import io
import pstats
import statistics
import sys
import threading
import time
from pathlib import Path

from dag import BATCH_SIZE, RUN_TERMINAL, RunStatus
from ddl import connect
from drills.report import seconds
from drills.topology import Topology
from drills.workload import generate_csv, import_plan

RECORDS = 100_000
TARGETS = {"ratio": 2.5, "rss_mib": 100.0, "overhead_ms": 100.0, "trigger_ms": 50.0}
BASELINE_DDL = """
DROP TABLE IF EXISTS bench_customers, bench_checkpoint;
CREATE TABLE bench_customers (id bigint PRIMARY KEY, name text, email text, amount bigint,
                              signup date, city text, note text);
CREATE TABLE bench_checkpoint (job text PRIMARY KEY, byte_offset bigint, records bigint);
CREATE TEMP TABLE batch (LIKE bench_customers) ON COMMIT DELETE ROWS;
"""
UPSERT = """
INSERT INTO bench_customers SELECT * FROM batch
ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, email = EXCLUDED.email,
    amount = EXCLUDED.amount, signup = EXCLUDED.signup, city = EXCLUDED.city,
    note = EXCLUDED.note
"""
CHECKPOINT = """
INSERT INTO bench_checkpoint VALUES ('import', %s, %s)
ON CONFLICT (job) DO UPDATE SET byte_offset = EXCLUDED.byte_offset, records = EXCLUDED.records
"""


def baseline(db_url: str, path: Path) -> float:
    """The hand-written import (b); returns its wall time in seconds."""
    conn = connect(db_url, "etl-bench-baseline")
    with conn.cursor() as cur:
        cur.execute(BASELINE_DDL)
    conn.commit()
    started = time.perf_counter()
    with path.open(newline="", encoding="utf-8") as f, conn.cursor() as cur:
        rows = csv.reader(f)
        next(rows)
        done, batch = 0, []
        for row in rows:
            row[1], row[6] = " ".join(row[1].split()), " ".join(row[6].split())
            batch.append(row)
            if len(batch) == BATCH_SIZE:
                done += _commit_batch(conn, cur, batch, done)
                batch = []
        if batch:
            _commit_batch(conn, cur, batch, done)
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def _commit_batch(conn, cur, batch: list[list[str]], done: int) -> int:
    buf = io.StringIO()
    csv.writer(buf).writerows(batch)
    buf.seek(0)
    cur.copy_expert("COPY batch FROM STDIN WITH (FORMAT csv)", buf)
    cur.execute(UPSERT)
    cur.execute(CHECKPOINT, (0, done + len(batch)))
    conn.commit()
    return len(batch)


def run_pipeline(topo: Topology, pipeline_id: str) -> tuple[float, dict]:
    """Trigger, poll until finished; (wall seconds POST -> succeeded seen, run)."""
    started = time.perf_counter()
    code, run = topo.trigger(pipeline_id)
    assert code == 201, run
    while run["status"] not in RUN_TERMINAL:
        time.sleep(0.02)
        run = topo.run(run["id"])
    if run["status"] != RunStatus.SUCCEEDED:
        raise SystemExit(f"benchmark run {run['id']} {run['status']}: {run}")
    return time.perf_counter() - started, run


def chain_plan(length: int) -> dict:
    """An ingest of tiny.csv followed by `length - 1` small transforms in a chain."""
    steps = [{"name": "s0", "type": "ingest", "config": {"source": "file", "path": "tiny.csv"}}]
    for i in range(1, length):
        op = {"op": "trim", "columns": ["name"]}
        steps.append(
            {"name": f"s{i}", "type": "transform", "depends_on": [f"s{i - 1}"], "config": op}
        )
    return {"steps": steps}


def trigger_latency_ms(topo: Topology, pipeline_id: str, n: int) -> list[float]:
    """Trigger -> first attempt started (database clock) for `n` runs, one after another."""
    latencies = []
    for _ in range(n):
        _, run = run_pipeline(topo, pipeline_id)
        row = topo.sql(
            "SELECT min(a.started_at) - r.created_at FROM runs r JOIN attempts a ON a.run_id = r.id"
            " WHERE r.id = %s GROUP BY r.created_at",
            run["id"],
        )[0]
        latencies.append(row[0].total_seconds() * 1000)
    return latencies


def measure(repeat: int) -> None:
    topo = Topology("bench", fast=False)
    topo.prepare()
    info = generate_csv(topo.data / "customers.csv", RECORDS)
    generate_csv(topo.data / "tiny.csv", 20)
    print(f"input: {info['records']} records, {info['bytes'] / 2**20:.1f} MiB, "
          f"{info['multiline']} multi-line; {repeat} repeats, medians")  # fmt: skip
    base = [baseline(topo.db_url, topo.data / "customers.csv") for _ in range(repeat)]
    try:
        topo.start()
        big = topo.create("bench-import", import_plan(jsonl=False))
        pipe = [run_pipeline(topo, big) for _ in range(repeat)]
        one, chain = topo.create("one-step", chain_plan(1)), topo.create("chain-30", chain_plan(30))
        ones = [
            seconds(r["started_at"], r["finished_at"])
            for _, r in (run_pipeline(topo, one) for _ in range(repeat))
        ]
        chains = [
            seconds(r["started_at"], r["finished_at"])
            for _, r in (run_pipeline(topo, chain) for _ in range(repeat))
        ]
        latencies = trigger_latency_ms(topo, one, 50)
    finally:
        topo.stop()
    pipeline_s, baseline_s = statistics.median(t for t, _ in pipe), statistics.median(base)
    ratio = pipeline_s / baseline_s
    overhead_ms = (statistics.median(chains) - statistics.median(ones)) / 29 * 1000
    trigger_ms = statistics.median(latencies)
    executors = [m for m in topo.sampler.table() if m["process"].startswith("executor")]
    print(f"\n{'figure':<48}{'value':>10}  {'COMPASS':<9} verdict")
    show("(a) pipeline trigger -> succeeded, s", pipeline_s)
    show("(b) baseline psycopg2 COPY + upsert, s", baseline_s)
    show("(c) ratio pipeline / baseline", ratio, TARGETS["ratio"])
    for m in executors:
        show(f"(d) {m['process']} peak RSS, MiB", m["peak_rss_mib"], TARGETS["rss_mib"])
    show("(e) orchestration overhead per step, ms", overhead_ms, TARGETS["overhead_ms"])
    show("(f) trigger -> first step running, median ms", trigger_ms, TARGETS["trigger_ms"])
    print(f"\nraw: pipeline runs {[round(t, 2) for t, _ in pipe]} s")
    print(f"     baseline runs {[round(t, 2) for t in base]} s")
    print(f"     1-step runs {ones} s, 30-step runs {chains} s")
    deciles = [round(q) for q in statistics.quantiles(latencies, n=10)]
    print(f"     trigger -> running deciles {deciles} ms")
    print(f"     last pipeline run, step (wait for claim, run) s: {_steps(pipe[-1][1])}")


def show(name: str, value: float, target: float | None = None) -> None:
    """One line of the figures table; `target` is an upper bound."""
    verdict = "" if target is None else f"<= {target:<6g} {'met' if value <= target else 'MISSED'}"
    print(f"{name:<48}{value:>10.2f}  {verdict}")


def _steps(run: dict) -> dict[str, tuple[float | None, float | None]]:
    """step -> (ready -> first attempt claimed, claimed -> finished), seconds."""
    return {
        s["name"]: (
            seconds(s["started_at"], s["attempts"][0]["started_at"]),
            seconds(s["attempts"][0]["started_at"], s["finished_at"]),
        )
        for s in run["steps"]
    }


# --- profiling -------------------------------------------------------------------------------


def profiled_executor(name: str, out: str) -> int:
    """`etl executor --name NAME` with every thread under cProfile; stats dumped to `out`
    when the executor stops (SIGTERM)."""
    from service.cli import main

    profiles: list[cProfile.Profile] = []

    def profile_this_thread(*_: object) -> None:
        # the first profiler event of a new thread swaps in a cProfile of its own (the step
        # actor runs in a dramatiq worker thread, which overrides Thread.run)
        sys.setprofile(None)
        profiles.append(profile := cProfile.Profile())
        profile.enable()

    threading.setprofile(profile_this_thread)
    try:
        return main(["executor", "--name", name])
    finally:
        stats = None
        for profile in profiles:
            try:
                stats = pstats.Stats(profile) if stats is None else stats.add(profile)
            except TypeError:  # a thread that never ran Python code
                pass
        if stats is not None:
            stats.dump_stats(out)


def profile() -> None:
    topo = Topology("bench-profile", fast=False)
    topo.prepare()
    generate_csv(topo.data / "customers.csv", RECORDS)
    me = [sys.executable, "-m", "bench.import_100k", "--profile-executor"]
    outs = {name: str(topo.dir / f"{name}.pstats") for name in ("executor-1", "executor-2")}
    roots = {"coordinator": [sys.executable, "-m", "service", "coordinator"]}
    roots.update({name: [*me, name, out] for name, out in outs.items()})
    try:
        topo.start(roots)
        elapsed, run = run_pipeline(topo, topo.create("profile", import_plan(jsonl=False)))
    finally:
        topo.stop()
    print(f"profiled run: {elapsed:.2f} s; step (wait for claim, run) s: {_steps(run)}")
    stats = pstats.Stats(*[o for o in outs.values() if Path(o).exists()])
    stats.strip_dirs().sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.import_100k", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--profile", action="store_true", help="profile the executors instead")
    parser.add_argument(
        "--profile-executor", nargs=2, metavar=("NAME", "OUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.profile_executor:
        return profiled_executor(*args.profile_executor)
    profile() if args.profile else measure(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
