"""`python -m bench.fused_memory`: issue 31's fused trees against the executor's 512 MiB.

Two 30-step-limit plans under the 50 MiB input limit, each run fused and unfused
(`ETL_FUSION=0`), `--repeat` times (default 3), every run on a fresh `etl up` topology with
production timings so that each executor's VmHWM is that run's peak:

- fan-out: 15 branches off one JSONL ingest of 49 records of 1 MiB: 14 `trim`s of the
  1 MiB value, each with its file export, and a file export of the input (30 steps, 29
  members that compute an output of the batch);
- chain: a CSV of 1,000 columns x 5,100 rows (about 49 MiB) through 26 `trim` transforms in
  a chain and a file export (28 steps).

Printed per case and mode: the run's seconds (POST trigger -> the run's `finished_at`) and
the peak RSS of the busiest executor (VmHWM from /proc, `drills.memory`), medians of the
runs with their range; fused / unfused per case. Not a test: nothing here asserts."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.import_100k import POLL_S, _load
from bench.scale import executor_peaks
from dag import RUN_TERMINAL, RunStatus
from drills.report import seconds
from drills.topology import Topology

MIB = 2**20
FAN_RECORDS, CHAIN_COLUMNS, CHAIN_ROWS = 49, 1000, 5100


def fan_out_plan() -> dict:
    source = {"source": "file", "path": "big.jsonl", "format": "jsonl"}
    steps: list[dict] = [{"name": "read", "type": "ingest", "config": source}]
    for i in range(14):  # each branch: a trim of every value and its file export
        trim = {"op": "trim", "columns": ["text"]}
        steps.append({"name": f"t{i}", "type": "transform", "depends_on": ["read"], "config": trim})
        out = {"target": "file", "path": f"t{i}.jsonl"}
        steps.append({"name": f"e{i}", "type": "export", "depends_on": [f"t{i}"], "config": out})
    copy = {"target": "file", "path": "all.jsonl"}
    steps.append({"name": "all", "type": "export", "depends_on": ["read"], "config": copy})
    return {"steps": steps}


def chain_plan() -> dict:
    read = {"name": "read", "type": "ingest", "config": {"source": "file", "path": "wide.csv"}}
    steps, previous = [read], "read"
    for i in range(26):
        columns = [f"c{(i * 37 + k) % CHAIN_COLUMNS}" for k in range(5)]
        config = {"op": "trim", "columns": columns}
        steps.append(
            {"name": f"t{i}", "type": "transform", "depends_on": [previous], "config": config}
        )
        previous = f"t{i}"
    out = {"target": "file", "path": "wide.jsonl"}
    steps.append({"name": "out", "type": "export", "depends_on": [previous], "config": out})
    return {"steps": steps}


def write_fan_out(path: Path) -> int:
    with path.open("w", encoding="utf-8") as f:
        for i in range(FAN_RECORDS):
            text = (chr(ord("a") + i % 26) * 1023 + " ") * 1024  # 1 MiB, trailing blank
            f.write(json.dumps({"id": i, "kind": "ab"[i % 2], "text": text}) + "\n")
    return path.stat().st_size


def write_chain(path: Path) -> int:
    with path.open("w", encoding="utf-8") as f:
        f.write(",".join(f"c{j}" for j in range(CHAIN_COLUMNS)) + "\n")
        for r in range(CHAIN_ROWS):
            f.write(",".join(f" v{(r * 7 + j) % 99999} " for j in range(CHAIN_COLUMNS)) + "\n")
    return path.stat().st_size


CASES = {
    "fan-out": (fan_out_plan, "big.jsonl", write_fan_out),
    "chain": (chain_plan, "wide.csv", write_chain),
}


def run_pipeline(topo: Topology, pipeline_id: str, timeout_s: float) -> float:
    """`bench.import_100k.run_pipeline`, but a poll the API answers 503 (the shared server
    out of connections for a moment) is polled again: seconds from the POST to the run's
    `finished_at`."""
    sent = datetime.now(UTC)
    code, run = topo.trigger(pipeline_id)
    assert code == 201, run
    while run["status"] not in RUN_TERMINAL:
        if (datetime.now(UTC) - sent).total_seconds() > timeout_s:
            raise SystemExit(f"benchmark run {run['id']} still {run['status']}")
        time.sleep(POLL_S)
        try:
            run = topo.run(run["id"])
        except RuntimeError as exc:
            if " 503 " not in str(exc):
                raise
    if run["status"] != RunStatus.SUCCEEDED:
        raise SystemExit(f"benchmark run {run['id']} {run['status']}: {run.get('error')}")
    return seconds(sent, run["finished_at"])


def one_run(case: str, fused: bool, index: int) -> tuple[float, float]:
    """One run on a fresh topology: (seconds, peak RSS in MiB of the busiest executor)."""
    plan, name, write = CASES[case]
    env = {} if fused else {"ETL_FUSION": "0"}
    topo = Topology(f"bench-fm-{case}-{int(fused)}-{index}", fast=False, env=env)
    topo.prepare()
    size = write(topo.data / name)
    try:
        topo.start()
        pipeline = topo.create(f"fm-{case}", plan())
        took = run_pipeline(topo, pipeline, timeout_s=1800)
    finally:
        topo.stop()
    peak = max(executor_peaks(topo).values())
    mode = "fused" if fused else "unfused"
    print(f"  {case} {mode} #{index + 1}: input {size / MIB:.1f} MiB, {took:.2f} s, "
          f"executor peak {peak:.0f} MiB", flush=True)  # fmt: skip
    return took, peak


def _fmt(values: list[float], unit: str) -> str:
    return f"{statistics.median(values):.1f} {unit} ({min(values):.1f} .. {max(values):.1f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    args = parser.parse_args()
    print(f"load before {_load()}")
    for case in args.case or list(CASES):
        figures: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for i in range(args.repeat):  # the modes alternate, so both see the same load
            for fused in (True, False):
                figures[fused].append(one_run(case, fused, i))
        for fused in (True, False):
            seconds, peaks = zip(*figures[fused], strict=True)
            print(f"{case} {'fused' if fused else 'unfused'}: {_fmt(list(seconds), 's')}, "
                  f"executor peak RSS {_fmt(list(peaks), 'MiB')}")  # fmt: skip
        ratio = [f[0] / u[0] for f, u in zip(figures[True], figures[False], strict=True)]
        print(f"{case} time fused / unfused per pair: {statistics.median(ratio):.2f}x "
              f"({min(ratio):.2f} .. {max(ratio):.2f})")  # fmt: skip
    print(f"load after {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
