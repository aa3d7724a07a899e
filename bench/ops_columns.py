"""`python -m bench.ops_columns [--against REF]`: each transform op per 100,000 records of the
seeded CSV of `bench.import_100k` (typed by `type_records` into 500-record `Columns`), its
column path (an unbuilt `Columns` in and out) beside its record path (the same op given the
batch as a list of dicts), interleaved in one process, gc off while a job runs. Also: what
building the dicts of a batch costs (the record path's toll on the first op of a chain), and
a chain from the typed `Columns` through normalize_whitespace -> map -> filter_eq ->
parse_date to the exports' column read (`column_values`) both ways, the record path's
building the dicts included. With `--against`, the record path of the op modules as they are
at git revision REF too. Prints milliseconds per 100,000 records: the minimum, the median and
the range over the repeats. Not a test: nothing here asserts (but that the paths agree)."""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import dag.inference
import dag.ops
from bench.parts import _at_revision
from dag import BATCH_SIZE, Columns, column_values
from dag.csvparts import read_csv_batches
from dag.ops import aggregate, filter_eq, parse_date, whitespace
from dag.ops import map as map_op
from dag.types import type_records
from drills.workload import COLUMNS, generate_csv

RECORDS = 100_000
CITIES = {"Lisbon": "PT", "Porto": "PT", "Riga": "LV", "Oslo": "NO", "Tallinn": "EE"}
CONFIGS: dict[str, dict[str, Any]] = {
    "trim": {"op": "trim", "columns": ["name", "note"]},
    "normalize_whitespace": {"op": "normalize_whitespace", "columns": ["name", "note"]},
    "map": {"op": "map", "column": "city", "mapping": CITIES, "into": "country"},
    "map (int, default)": {"op": "map", "column": "amount", "mapping": {"7": 1}, "default": 0},
    "filter_eq (1 in 9)": {"op": "filter_eq", "column": "city", "value": "Oslo"},
    "parse_date": {"op": "parse_date", "column": "signup"},
    "aggregate": {"op": "aggregate", "column": "amount"},
    "aggregate (by city)": {"op": "aggregate", "column": "amount", "group_by": ["city"]},
}
CHAIN = ["normalize_whitespace", "map", "filter_eq (1 in 9)", "parse_date"]
MODULES = (whitespace, map_op, filter_eq, parse_date, aggregate)

Build = Callable[[Mapping[str, Any], Mapping[str, str]], dag.ops.Transform]


def _build_now(config: Mapping[str, Any], columns: Mapping[str, str]) -> dag.ops.Transform:
    return dag.ops.build_transform(config, columns)


def _build_at(ref: str) -> Build:
    """`build_transform` of the op modules as they are at revision `ref`."""
    ops = {op.name: op for m in MODULES for op in _at_revision(ref, m).OPS}
    return lambda config, columns: ops[config["op"]].build(config, columns)


def _run(build: Build, configs: Sequence[dict], columns: dict, batches: list) -> list:
    """`batches` through the ops of `configs` in turn, each batch's output (and the
    aggregate's `finish`) as what the exports read: its column values."""
    transforms = []
    for config in configs:
        transforms.append(build(config, columns))
        columns = transforms[-1].output_columns
    outputs = []
    for batch in batches:
        for transform in transforms:
            batch, _ = transform.apply(batch, 1)
        outputs.append(batch)
    finished = transforms[-1].finish()
    return [*outputs, finished] if finished else outputs


def _jobs(ref: str | None, csv_path: Path) -> dict[str, dict[str, Callable[[], Any]]]:
    with csv_path.open("rb") as f:
        raw = list(read_csv_batches(f, batch_size=BATCH_SIZE))
    types = dag.inference.infer_columns(raw[0].header, raw[0].records, COLUMNS)
    typed = [type_records(b.records, types)[0] for b in raw]
    assert all(isinstance(t, Columns) and not t.built for t in typed), "a batch was not typed"
    dicts = [[dict(r) for r in Columns(t.names, t.columns)] for t in typed]
    old = _build_at(ref) if ref else None

    def sides(configs: list[dict], chain: bool = False) -> dict[str, Callable[[], Any]]:
        """A job per side. A chain starts where a real one does, from the typed `Columns`:
        the record path builds their dicts in the job (its first op would), and the
        exports read each output's column values."""

        def job(build: Build, batches: Callable[[], list]) -> Callable[[], Any]:
            def run() -> Any:
                out = _run(build, configs, types, batches())
                return [column_values(o, list(o[0]) if o else []) for o in out] if chain else out

            return run

        def fresh() -> list[Columns]:  # unbuilt, sharing the typed lists (nothing writes them)
            return [Columns(t.names, t.columns) for t in typed]

        records = (lambda: [c.records() for c in fresh()]) if chain else (lambda: dicts)
        found = {"columns": job(_build_now, fresh), "records": job(_build_now, records)}
        if old is not None:  # the ops at `ref` build the dicts of a Columns themselves
            found[f"records@{ref}"] = job(old, fresh if chain else records)
        return found

    jobs = {name: sides([config]) for name, config in CONFIGS.items()}
    jobs["chain -> column_values"] = sides([CONFIGS[name] for name in CHAIN], chain=True)
    jobs["build the dicts"] = {
        "columns": lambda: [Columns(t.names, t.columns) for t in typed],
        "records": lambda: [Columns(t.names, t.columns).records() for t in typed],
    }
    return jobs


def _timed(job: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        result = job()
        return time.perf_counter() - started, result
    finally:
        gc.enable()


def _agree(results: dict[str, Any]) -> bool:
    """Whether the sides gave equal batches (a `Columns` equals the list of its records)."""
    values = [[list(batch) for batch in result] for result in results.values()]
    return all(v == values[0] for v in values[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", metavar="REF", help="also the record path at REF")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "customers.csv"
        generate_csv(csv_path, RECORDS)
        jobs = _jobs(args.against, csv_path)
    print(f"load average before: {os.getloadavg()}")
    print(f"{'op':<24}{'side':<22}{'min':>8}{'median':>8}  range (ms / 100k)")
    for name, sides in jobs.items():
        times: dict[str, list[float]] = {side: [] for side in sides}
        results: dict[str, Any] = {}
        for _ in range(args.repeat):  # the sides interleaved, round by round
            for side, job in sides.items():
                seconds, results[side] = _timed(job)
                times[side].append(seconds * 1000)
        same = "" if name == "build the dicts" or _agree(results) else "  RESULTS DIFFER"
        for side, ms in times.items():
            spread = f"{min(ms):.1f}-{max(ms):.1f}"
            print(f"{name:<24}{side:<22}{min(ms):>8.1f}{statistics.median(ms):>8.1f}  {spread}"
                  f"{same}")  # fmt: skip
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
