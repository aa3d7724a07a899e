"""`python -m bench.checks_cost`: what four data checks cost on the 100,000-record chain
(issue 35: at most +10 %). Not a test: nothing here asserts.

The chain is import_100k's shape (a): ingest the seeded 100,000-record CSV ->
normalize_whitespace -> table export (key `id`). The checked copy is the same plan with four
checks on `normalize`'s output, all of which hold: `unique(id)` (its keys go to
`step_check_key_batches` in each batch's commit, and are counted in PostgreSQL at the end),
`not_null(id, email)`, `range(amount, -5000 .. 2000000)` and `accepted_values(city)`.

Each repeat runs both pipelines through the API and two executors (production timings,
POST trigger -> the run's `finished_at`), the order alternating from one repeat to the next
so that a change in the machine's load hits both. Printed: each pipeline's median and range,
and the ratio checked / plain of each repeat (median and range) against the target 1.10."""

from __future__ import annotations

import argparse
import copy
import statistics

from bench.import_100k import RECORDS, run_pipeline
from drills.topology import Topology
from drills.workload import _CITY, generate_csv, import_plan

TARGET = 1.10
CHECKS = [
    {"check": "unique", "columns": ["id"]},
    {"check": "not_null", "columns": ["id", "email"]},
    {"check": "range", "column": "amount", "min": -5000, "max": 2_000_000},
    {"check": "accepted_values", "column": "city", "values": list(_CITY)},
]


def checked_plan() -> dict:
    """Shape (a) with the four checks on `normalize`."""
    plan = copy.deepcopy(import_plan(jsonl=False))
    next(s for s in plan["steps"] if s["name"] == "normalize")["checks"] = CHECKS
    return plan


def measure(repeat: int) -> None:
    topo = Topology("bench-checks", fast=False)
    topo.prepare()
    info = generate_csv(topo.data / "customers.csv", RECORDS)
    print(f"input: {info['records']} records, {info['bytes'] / 2**20:.1f} MiB; {repeat} repeats")
    times: dict[str, list[float]] = {"plain": [], "checked": []}
    ratios: list[float] = []
    try:
        topo.start()
        ids = {
            "plain": topo.create("bench-plain", import_plan(jsonl=False)),
            "checked": topo.create("bench-checked", checked_plan()),
        }
        for i in range(repeat):
            order = ("plain", "checked") if i % 2 == 0 else ("checked", "plain")
            got = {}
            for name in order:
                got[name], run = run_pipeline(topo, ids[name])
                if name == "checked":
                    outcomes = [c["outcome"] for s in run["steps"] for c in s.get("checks", [])]
                    assert outcomes == ["passed"] * len(CHECKS), outcomes
            for name, seconds in got.items():
                times[name].append(seconds)
            ratios.append(got["checked"] / got["plain"])
    finally:
        topo.stop()
    print(f"\n{'figure':<46}{'median':>9}  range")
    for name, values in times.items():
        print(f"{name + ' chain, trigger -> succeeded, s':<46}{statistics.median(values):>9.2f}"
              f"  {min(values):.2f} .. {max(values):.2f}")  # fmt: skip
    median = statistics.median(ratios)
    verdict = "met" if median <= TARGET else "NOT met"
    spread = f"{min(ratios):.3f} .. {max(ratios):.3f}"
    print(f"{'ratio checked / plain (per repeat)':<46}{median:>8.3f}x  {spread};"
          f" target <= {TARGET:.2f}x: {verdict}")  # fmt: skip
    print(f"runs: plain {[round(t, 2) for t in times['plain']]} s, "
          f"checked {[round(t, 2) for t in times['checked']]} s")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.checks_cost", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=7, help="pairs of runs (median)")
    measure(parser.parse_args().repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
