"""`python -m bench.orchestration [--runs 50]`: what the engine adds around tiny steps, next
to the floor of handing work from one process to another through PostgreSQL, in the same
run. Not a test: nothing here asserts.

- trigger -> first attempt started: the run's `created_at` to its first attempt's
  `started_at` (both on the database's clock), on the default (fused) engine: each run is a
  one-step ingest of 20 records;
- step to step, unfused (`ETL_FUSION=0`): a step's attempt `finished_at` to the next step's
  first attempt `started_at`, over 5-step chains of small transforms on the same 20 records
  (4 gaps a run);
- the baseline: a `NOTIFY` committed by one session -> woken in another session's `LISTEN`
  (`select` on its socket), the physical floor of a hand-off between two processes.

Each topology is `etl up` with production timings (`drills.topology.Topology`, two
executors), runs triggered one after another. Printed per figure: p50, p90 and the range
over all the samples, and the p50 of each block of a fifth of the runs (median and range of
the five)."""

from __future__ import annotations

import argparse
import select
import statistics
import sys
import time

from bench.import_100k import _load, chain_plan, run_pipeline
from bench.million import sql
from ddl import connect
from drills.topology import Topology
from drills.workload import generate_csv

TARGETS_MS = {"trigger -> first attempt": 40.0, "step to step, unfused": 30.0}
CHAIN = 5  # steps of the unfused chain: 4 gaps a run
BLOCKS = 5

FIRST_ATTEMPT = (
    "SELECT extract(epoch FROM min(a.started_at) - r.created_at) * 1000 FROM runs r"
    " JOIN attempts a ON a.run_id = r.id WHERE r.id = %s GROUP BY r.created_at"
)
# per step of the chain: its first attempt's creation and start, its last attempt's end
STEP_TIMES = (
    "SELECT step_name, min(created_at), min(started_at), max(finished_at) FROM attempts"
    " WHERE run_id = %s GROUP BY step_name"
)


def step_gaps_ms(topo: Topology, run_id: str) -> list[tuple[float, float, float]]:
    """Per gap of the chain `s0 .. s(CHAIN-1)` of a run, ms: (s(i-1) finished -> s(i)
    started, of it finished -> the attempt created (the coordinator's part), created ->
    started (the executor's claim))."""
    times = {name: rest for name, *rest in sql(topo, STEP_TIMES, run_id)}
    gaps = []
    for i in range(1, CHAIN):
        created, started, _ = times[f"s{i}"]
        finished = times[f"s{i - 1}"][2]
        parts = (started - finished, created - finished, started - created)
        gaps.append(tuple(p.total_seconds() * 1000 for p in parts))
    return gaps


def notify_floor_ms(db_url: str, n: int) -> list[float]:
    """`n` NOTIFYs committed on one session, each until another session's LISTEN wakes."""
    listener, sender = connect(db_url, "bench-listen"), connect(db_url, "bench-notify")
    listener.autocommit = True
    with listener.cursor() as cur:
        cur.execute("LISTEN bench_floor")
    found = []
    try:
        for _ in range(n):
            started = time.perf_counter()
            with sender.cursor() as cur:
                cur.execute("NOTIFY bench_floor")
            sender.commit()
            while not listener.notifies:
                select.select([listener], [], [], 5)
                listener.poll()
            found.append((time.perf_counter() - started) * 1000)
            listener.notifies.clear()
            time.sleep(0.05)
    finally:
        listener.close()
        sender.close()
    return found


def measure(runs: int, env: dict[str, str], plan: dict, figure) -> list:
    """`runs` runs of `plan` on a fresh topology with `env`; `figure(topo, run_id)` of each
    (a list of samples), concatenated per run in order."""
    topo = Topology(f"bench-orch{'-unfused' if env else ''}", fast=False, env=env)
    topo.prepare()
    generate_csv(topo.data / "tiny.csv", 20)
    per_run: list[list] = []
    try:
        topo.start()
        pipeline = topo.create("tiny", plan)
        run_pipeline(topo, pipeline)  # warm-up: imports, prepared statements, pools
        for _ in range(runs):
            _, run = run_pipeline(topo, pipeline)
            per_run.append(figure(topo, run["id"]))
    finally:
        topo.stop()
    return [x for samples in per_run for x in samples]


def report(name: str, samples: list[float], target: float | None) -> None:
    deciles = statistics.quantiles(samples, n=10)
    size = len(samples) // BLOCKS
    blocks = [statistics.median(samples[i * size : (i + 1) * size]) for i in range(BLOCKS)]
    verdict = "" if target is None else f"  target <= {target:g}: "
    if target is not None:
        verdict += "met" if statistics.median(samples) <= target else "MISSED"
    print(
        f"{name:<32} n={len(samples):<4} p50 {statistics.median(samples):6.1f}"
        f"  p90 {deciles[8]:6.1f}  range {min(samples):.1f} .. {max(samples):.1f} ms"
        f"  | block p50s: median {statistics.median(blocks):.1f}"
        f" ({min(blocks):.1f} .. {max(blocks):.1f}){verdict}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.orchestration", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=50, help="runs per topology (>= 50)")
    args = parser.parse_args()
    print(f"{args.runs} runs per figure; load {_load()}", flush=True)
    first = measure(
        args.runs, {}, chain_plan(1), lambda t, r: [sql(t, FIRST_ATTEMPT, r)[0][0]]
    )  # fmt: skip
    print(f"load after the fused runs: {_load()}", flush=True)
    gaps = measure(args.runs, {"ETL_FUSION": "0"}, chain_plan(CHAIN), step_gaps_ms)
    hops = [list(series) for series in zip(*gaps, strict=True)]
    print(f"load after the unfused runs: {_load()}", flush=True)
    probe = Topology("bench-orch-floor", fast=False)
    probe.prepare()
    try:
        floor = notify_floor_ms(probe.db_url, args.runs)
    finally:
        probe.drop_database()
    print(f"load at the end: {_load()}\n")
    report("trigger -> first attempt", [float(x) for x in first], TARGETS_MS[
        "trigger -> first attempt"])  # fmt: skip
    report("step to step, unfused", hops[0], TARGETS_MS["step to step, unfused"])
    report("  of it: finished -> created", hops[1], None)
    report("  of it: created -> started", hops[2], None)
    report("baseline: NOTIFY -> LISTEN", floor, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
