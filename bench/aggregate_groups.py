"""`python -m bench.aggregate_groups`: issue 31's aggregate over many groups, per group.

- pipeline: a CSV of 2 x G records (`g,v`, every group in two batches far apart) through
  ingest -> aggregate (`group_by: [g]`) -> JSONL file export, G = 100,000 and 1,000,000, on
  one `etl up` topology with production timings; seconds from the POST trigger to the run's
  `finished_at`, divided by G. Each run is paired with its baseline right before it: one
  Python process reading the same CSV with `csv.reader`, summing in a dict and writing the
  same JSONL file.
- `--in-process`: the aggregate alone, batch by batch, each batch followed by its
  checkpoint encoding: the parts of `dag.transforms` (what the executor stores) against the
  whole state encoded per batch (`orjson.dumps(state())`, the checkpoint before issue 31),
  at 10,000 .. 400,000 groups (the whole state only to 40,000: it grows quadratically).

Medians of `--repeat` runs (default 3) with their range. Not a test: nothing here asserts."""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

import orjson

from bench.import_100k import _load, run_pipeline
from dag import BATCH_SIZE, build_transform
from drills.topology import Topology

PLAN = {
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "groups.csv", "columns": {"g": "int", "v": "int"}}},
        {"name": "agg", "type": "transform", "depends_on": ["read"],
         "config": {"op": "aggregate", "column": "v", "group_by": ["g"]}},
        {"name": "out", "type": "export", "depends_on": ["agg"],
         "config": {"target": "file", "path": "groups.jsonl"}},
    ]
}  # fmt: skip


def _key(i: int, groups: int) -> int:
    return (i * 7919) % groups  # 7919 is prime: every group twice in 2 x groups records


def write_csv(path: Path, groups: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        f.write("g,v\n")
        f.writelines(f"{_key(i, groups)},{i % 997 - 400}\n" for i in range(2 * groups))


def baseline(path: Path, out: Path) -> float:
    """The hand-written aggregate: csv.reader, a dict of [count, sum, min, max], JSONL."""
    started = time.perf_counter()
    groups: dict[int, list[int]] = {}
    with path.open(encoding="utf-8", newline="") as f:
        rows = csv.reader(f)
        next(rows)
        for g, v in rows:
            key, value = int(g), int(v)
            acc = groups.get(key)
            if acc is None:
                groups[key] = [1, value, value, value]
            else:
                acc[0] += 1
                acc[1] += value
                acc[2] = min(acc[2], value)
                acc[3] = max(acc[3], value)
    with out.open("w", encoding="utf-8") as f:
        for key, (count, total, low, high) in groups.items():
            record = {"g": key, "count": count, "sum": total, "min": low, "max": high}
            f.write(json.dumps(record) + "\n")
    return time.perf_counter() - started


def pipeline(repeat: int) -> None:
    topo = Topology("bench-aggregate-groups", fast=False)
    topo.prepare()
    try:
        topo.start()
        pipeline_id = topo.create("groups", PLAN)
        per_group: dict[int, tuple[list[float], list[float]]] = {}
        for groups in (100_000, 1_000_000):
            write_csv(topo.data / "groups.csv", groups)
            pipe, base = [], []
            for _ in range(repeat):
                base.append(baseline(topo.data / "groups.csv", topo.dir / "b.jsonl") / groups)
                pipe.append(run_pipeline(topo, pipeline_id, timeout_s=3600)[0] / groups)
                print(f"  {groups:,} groups: pipeline {pipe[-1] * 1e6:.1f} us/group, "
                      f"baseline {base[-1] * 1e6:.2f} us/group", flush=True)  # fmt: skip
            per_group[groups] = (pipe, base)
    finally:
        topo.stop()
    for groups, (pipe, base) in per_group.items():
        print(f"{groups:>9,} groups: pipeline {_us(pipe)}, baseline {_us(base)} per group")
    (small, small_base), (large, large_base) = per_group.values()
    print(f"1,000,000 / 100,000 per group: pipeline "
          f"{statistics.median(large) / statistics.median(small):.2f}x, baseline "
          f"{statistics.median(large_base) / statistics.median(small_base):.2f}x")  # fmt: skip


def in_process(repeat: int) -> None:
    config = {"op": "aggregate", "column": "v", "group_by": ["g"]}
    for groups in (10_000, 20_000, 40_000, 100_000, 400_000):
        records = [{"g": _key(i, groups), "v": i % 997 - 400} for i in range(2 * groups)]
        parts = [_timed(records, config, whole=False) / groups for _ in range(repeat)]
        line = f"{groups:>7,} groups: parts {_us(parts)}"
        if groups <= 40_000:
            whole = [_timed(records, config, whole=True) / groups for _ in range(repeat)]
            line += f", whole state per batch {_us(whole)} per group"
        print(line, flush=True)


def _timed(records: list[dict], config: dict, *, whole: bool) -> float:
    transform = build_transform(config, {"g": "int", "v": "int"})
    started = time.perf_counter()
    for lo in range(0, len(records), BATCH_SIZE):
        transform.apply(records[lo : lo + BATCH_SIZE], lo + 1)
        if whole:
            orjson.dumps(transform.state())
        else:
            transform.checkpoint()
    transform.finish()
    return time.perf_counter() - started


def _us(values: list[float]) -> str:
    v = [x * 1e6 for x in values]
    return f"{statistics.median(v):.2f} us ({min(v):.2f} .. {max(v):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--in-process", action="store_true")
    args = parser.parse_args()
    print(f"load before {_load()}")
    if args.in_process:
        in_process(args.repeat)
    else:
        pipeline(args.repeat)
    print(f"load after {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
