"""`python -m bench.import_100k`: our pipeline against a raw psycopg2 baseline on the same
seeded 100,000-record CSV, plus orchestration overhead and trigger latency. Prints a table
of figures next to the COMPASS targets. Not a test: nothing here asserts.

Two shapes (issue 13), each measured pipeline run next to a baseline run (interleaved, so a
change in the machine's load hits both):
- shape (a): ingest -> normalize_whitespace -> table export (key `id`); its baseline is
  csv.reader + the same normalisation + COPY into a temp table and INSERT .. ON CONFLICT
  upsert in 500-record batches, a checkpoint row per commit;
- shape (b): the same plus a JSONL file export of the normalised records; its baseline also
  writes the JSONL file (json.dumps per record, fsync at the end).

- (a) pipeline: POST trigger -> the run's `finished_at` (`run_pipeline`), through the API
  and two executors, production timings; (b) the baseline; (c) their ratio (median, and
  the range over the runs); (d) peak RSS of each executor (/proc, VmHWM);
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
import json
import os
import pstats
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from dag import BATCH_SIZE, RUN_TERMINAL, RunStatus
from ddl import connect
from drills.report import seconds
from drills.topology import Topology
from drills.workload import generate_csv, import_plan

RECORDS = 100_000
POLL_S = 0.25  # between polls of a running benchmark run
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


def baseline(db_url: str, path: Path, jsonl: Path | None = None) -> float:
    """The hand-written import (and, with `jsonl`, the JSONL file of the normalised
    records); returns its wall time in seconds."""
    conn = connect(db_url, "etl-bench-baseline")
    with conn.cursor() as cur:
        cur.execute(BASELINE_DDL)
    conn.commit()
    started = time.perf_counter()
    out = jsonl.open("w", encoding="utf-8") if jsonl is not None else None
    with path.open(newline="", encoding="utf-8") as f, conn.cursor() as cur:
        rows = csv.reader(f)
        names = next(rows)
        done, batch = 0, []
        for row in rows:
            row[1], row[6] = " ".join(row[1].split()), " ".join(row[6].split())
            batch.append(row)
            if len(batch) == BATCH_SIZE:
                done += _commit_batch(conn, cur, batch, done, out, names)
                batch = []
        if batch:
            _commit_batch(conn, cur, batch, done, out, names)
    if out is not None:
        out.flush()
        os.fsync(out.fileno())
        out.close()
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def _commit_batch(conn, cur, batch: list[list[str]], done: int, out, names: list[str]) -> int:
    if out is not None:
        out.write(
            "".join(json.dumps(_typed(names, row), ensure_ascii=False) + "\n" for row in batch)
        )
    buf = io.StringIO()
    csv.writer(buf).writerows(batch)
    buf.seek(0)
    cur.copy_expert("COPY batch FROM STDIN WITH (FORMAT csv)", buf)
    cur.execute(UPSERT)
    cur.execute(CHECKPOINT, (0, done + len(batch)))
    conn.commit()
    return len(batch)


def _typed(names: list[str], row: list[str]) -> dict:
    record: dict = dict(zip(names, row, strict=True))
    record["id"], record["amount"] = int(row[0]), int(row[3])
    return record


def run_pipeline(topo: Topology, pipeline_id: str, timeout_s: float = 900) -> tuple[float, dict]:
    """Trigger, poll until finished; (seconds from the POST to the run's `finished_at`, run).

    The end is the run's own `finished_at` (the database's clock: this machine's), not the
    poll that sees it, so the pace of the polls adds nothing to the figure. They come
    `POLL_S` apart: at 50 a second, the API's workers, their database sessions and this
    process took about 15 % of the machine's CPU while the plan ran, CPU the run needed."""
    sent = datetime.now(UTC)
    code, run = topo.trigger(pipeline_id)
    assert code == 201, run
    while run["status"] not in RUN_TERMINAL:
        if (datetime.now(UTC) - sent).total_seconds() > timeout_s:
            raise SystemExit(f"benchmark run {run['id']} still {run['status']} after {timeout_s} s")
        time.sleep(POLL_S)
        run = topo.run(run["id"])
    if run["status"] != RunStatus.SUCCEEDED:
        raise SystemExit(f"benchmark run {run['id']} {run['status']}: {run}")
    return seconds(sent, run["finished_at"]), run


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


SHAPES = {"a": False, "b": True}  # shape -> with the JSONL file export


def measure_shapes(topo: Topology, repeat: int) -> dict[str, dict]:
    """Per shape, `repeat` pairs of (baseline, pipeline) runs, interleaved so that load
    drifts hit both: {shape: {"base": [s], "pipe": [(s, run)], "ratios": [x]}}."""
    csv_path = topo.data / "customers.csv"
    pipelines = {k: topo.create(f"bench-{k}", import_plan(jsonl=j)) for k, j in SHAPES.items()}
    found: dict[str, dict] = {k: {"base": [], "pipe": [], "ratios": []} for k in SHAPES}
    for _ in range(repeat):
        for shape, jsonl in SHAPES.items():
            base = baseline(topo.db_url, csv_path, topo.dir / "baseline.jsonl" if jsonl else None)
            pipe = run_pipeline(topo, pipelines[shape])
            found[shape]["base"].append(base)
            found[shape]["pipe"].append(pipe)
            found[shape]["ratios"].append(pipe[0] / base)
    return found


def measure(repeat: int, ratio_only: bool, env: dict[str, str]) -> None:
    topo = Topology("bench", fast=False, env=env)
    topo.prepare()
    info = generate_csv(topo.data / "customers.csv", RECORDS)
    generate_csv(topo.data / "tiny.csv", 20)
    print(f"input: {info['records']} records, {info['bytes'] / 2**20:.1f} MiB, "
          f"{info['multiline']} multi-line; {repeat} repeats, medians; load {_load()}"
          f"{'; env ' + ' '.join(f'{k}={v}' for k, v in env.items()) if env else ''}")  # fmt: skip
    ones: list[float] = []
    chains: list[float] = []
    latencies: list[float] = []
    try:
        topo.start()
        shapes = measure_shapes(topo, repeat)
        if not ratio_only:
            one, chain = (
                topo.create("one-step", chain_plan(1)),
                topo.create("chain-30", chain_plan(30)),
            )
            ones = [_run_s(run_pipeline(topo, one)[1]) for _ in range(repeat)]
            chains = [_run_s(run_pipeline(topo, chain)[1]) for _ in range(repeat)]
            latencies = trigger_latency_ms(topo, one, 50)
    finally:
        topo.stop()
    print(f"load after: {_load()}")
    print(f"\n{'figure':<48}{'value':>10}  {'COMPASS':<9} verdict")
    for shape, f in shapes.items():
        show(
            f"({shape}) pipeline trigger -> succeeded, s",
            statistics.median(t for t, _ in f["pipe"]),
        )
        show(f"({shape}) baseline psycopg2 COPY + upsert, s", statistics.median(f["base"]))
        show(f"({shape}) ratio pipeline / baseline (median)", statistics.median(f["ratios"]),
             TARGETS["ratio"])  # fmt: skip
    executors = [m for m in topo.sampler.table() if m["process"].startswith("executor")]
    for m in executors:
        show(f"(d) {m['process']} peak RSS, MiB", m["peak_rss_mib"], TARGETS["rss_mib"])
    if not ratio_only:
        overhead_ms = (statistics.median(chains) - statistics.median(ones)) / 29 * 1000
        show("(e) orchestration overhead per step, ms", overhead_ms, TARGETS["overhead_ms"])
        show("(f) trigger -> first step running, median ms", statistics.median(latencies),
             TARGETS["trigger_ms"])  # fmt: skip
    for shape, f in shapes.items():
        ratios = f["ratios"]
        print(f"\nshape ({shape}): ratio range {min(ratios):.2f}x .. {max(ratios):.2f}x, "
              f"runs {[round(r, 2) for r in ratios]}")  # fmt: skip
        print(f"     pipeline runs {[round(t, 2) for t, _ in f['pipe']]} s")
        print(f"     baseline runs {[round(t, 2) for t in f['base']]} s")
        print(f"     last run, step (wait for claim, run) s: {_steps(f['pipe'][-1][1])}")
    if not ratio_only:
        print(f"\n1-step runs {ones} s, 30-step runs {chains} s")
        deciles = [round(q) for q in statistics.quantiles(latencies, n=10)]
        print(f"trigger -> running deciles {deciles} ms")


def _run_s(run: dict) -> float:
    return seconds(run["started_at"], run["finished_at"])


def _load() -> str:
    """The 1/5/15-minute load averages (the machine is shared: say how busy it was)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


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


def profile(shape: str) -> None:
    topo = Topology("bench-profile", fast=False)
    topo.prepare()
    generate_csv(topo.data / "customers.csv", RECORDS)
    me = [sys.executable, "-m", "bench.import_100k", "--profile-executor"]
    outs = {name: str(topo.dir / f"{name}.pstats") for name in ("executor-1", "executor-2")}
    roots = {"coordinator": [sys.executable, "-m", "service", "coordinator"]}
    roots.update({name: [*me, name, out] for name, out in outs.items()})
    try:
        topo.start(roots)
        plan = import_plan(jsonl=SHAPES[shape])
        elapsed, run = run_pipeline(topo, topo.create("profile", plan))
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
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median)")
    parser.add_argument(
        "--ratio-only", action="store_true", help="only the two shapes, not (e) and (f)"
    )
    parser.add_argument("--profile", action="store_true", help="profile the executors instead")
    parser.add_argument("--shape", choices=tuple(SHAPES), default="a", help="shape to profile")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an ETL_* setting of the topology, e.g. ETL_FUSION=0 for the unfused engine",
    )
    parser.add_argument(
        "--profile-executor", nargs=2, metavar=("NAME", "OUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.profile_executor:
        return profiled_executor(*args.profile_executor)
    env = dict(item.split("=", 1) for item in args.env)
    profile(args.shape) if args.profile else measure(args.repeat, args.ratio_only, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
