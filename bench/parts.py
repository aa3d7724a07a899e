"""`python -m bench.parts [--against REF]`: the per-record hot path of the 100k CSV import, one
function at a time, on the seeded CSV of `bench.import_100k`: `read_csv_batches`,
`type_records`, the table export's `_encode_batch` and the ingest's inference pass
(`FileSource.infer`, the chain's declared columns) (no database). With `--against`, the
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
import connectors.table_export
import dag.csvparts
import dag.inference
import dag.types
from dag import BATCH_SIZE
from drills.workload import COLUMNS, generate_csv, import_plan

RECORDS = 100_000
MODULES = {
    "csvparts": dag.csvparts,
    "types": dag.types,
    "tables": connectors.table_export,
    "steps": actors.steps,
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
        sides = {"now": _jobs(MODULES, csv_path)}
        if args.against:
            old = {name: _at_revision(args.against, m) for name, m in MODULES.items()}
            sides[args.against] = _jobs(old, csv_path)
        print(f"{'function':<18}" + "".join(f"{side:>12}" for side in sides) + "  (s / 100k)")
        for name in [args.only] if args.only else sides["now"]:
            best: dict[str, float] = {side: float("inf") for side in sides}
            results: dict[str, Any] = {}
            for _ in range(args.repeat):
                for side, jobs in sides.items():
                    results.pop(side, None)
                    seconds, results[side] = _timed(jobs[name])
                    best[side] = min(best[side], seconds)
            same = "" if len({repr(r) for r in results.values()}) == 1 else "  RESULTS DIFFER"
            print(f"{name:<18}" + "".join(f"{best[s]:>12.3f}" for s in sides) + same)


if __name__ == "__main__":
    main()
