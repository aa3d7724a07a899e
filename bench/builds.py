"""`python -m bench.builds`: which steps build a typed batch (`dag.Columns`) into dicts, and
where, on the 100,000-record chain (`drills.workload.import_plan`, the plan of
`bench.import_100k` and `bench.peers_100k`), on its ingest straight into its exports and a
CSV file (`exports_plan`) and on the 11-step nycflights13 plan (`bench.real_dag.PLAN`).
Not a test: nothing here asserts.

The two executors of the topology run with `BuildCounter` installed: `Columns.records` is
wrapped so that each batch built into dicts is counted once, by the step whose pass built it
(`actors.group.Member` in the caller's frames) and by the first function outside
`dag/columns.py` and `dag/records.py` that asked for the records. The counts go to a JSON
file per executor when it stops. Printed: per plan, each step's output batches and its
builds by place. The counter is the benchmark's and the tests' (`BuildCounter` as a context
manager); the product has no global of its own for it."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from dag.columns import Columns

_HERE = Path(__file__).resolve().parent.parent


class BuildCounter:
    """While installed, `Columns.records` counts each first build, by (step, place)."""

    def __init__(self) -> None:
        self.builds: Counter[tuple[str, str]] = Counter()
        self._original: Any = None

    def __enter__(self) -> BuildCounter:
        original = self._original = Columns.records
        counter = self

        def records(columns: Columns) -> list[dict[str, Any]]:
            if not columns.built:
                counter.builds[_site(sys._getframe(1))] += 1
            return original(columns)

        Columns.records = records  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        Columns.records = self._original  # type: ignore[method-assign]

    @property
    def total(self) -> int:
        return sum(self.builds.values())


def _site(frame: FrameType | None) -> tuple[str, str]:
    """(the step whose pass is running, or "-", the first caller outside the batch classes
    of dag/columns.py and dag/records.py)."""
    place, step = "", "-"
    while frame is not None:
        path = frame.f_code.co_filename
        if not place and not path.endswith(("columns.py", "records.py", "builds.py")):
            try:
                where = Path(path).resolve().relative_to(_HERE)
            except ValueError:
                where = Path(path).name
            place = f"{where}:{frame.f_code.co_name}"
        member = frame.f_locals.get("m")
        if type(member).__name__ == "Member":
            step = member.name
            break
        frame = frame.f_back
    return step, place


def counting_executor(name: str, out: str) -> int:
    """`etl executor --name NAME` with a `BuildCounter` installed; its counts written to
    `out` (JSON) when the executor stops."""
    from service.cli import main

    counter = BuildCounter()
    with counter:
        try:
            return main(["executor", "--name", name])
        finally:
            rows = [[step, place, n] for (step, place), n in sorted(counter.builds.items())]
            Path(out).write_text(json.dumps(rows))


def _measure(label: str, plan: dict, data: dict[str, Path]) -> None:
    from bench.import_100k import run_pipeline
    from drills.topology import Topology

    topo = Topology(f"bench-builds-{label}", fast=False)
    topo.prepare()
    for name, path in data.items():
        shutil.copy(path, topo.data / name)
    me = [sys.executable, "-m", "bench.builds", "--executor"]
    outs = {name: topo.dir / f"{name}.builds.json" for name in ("executor-1", "executor-2")}
    roots = {"coordinator": [sys.executable, "-m", "service", "coordinator"]}
    roots.update({name: [*me, name, str(out)] for name, out in outs.items()})
    try:
        topo.start(roots)
        elapsed, run = run_pipeline(topo, topo.create(f"builds-{label}", plan))
    finally:
        topo.stop()
    builds: Counter[tuple[str, str]] = Counter()
    for out in outs.values():
        if out.exists():
            for step, place, n in json.loads(out.read_text()):
                builds[step, place] += n
    print(f"\n{label}: run {elapsed:.2f} s; batches built into dicts, by step and place:")
    print("| step | output batches | records out | built | where |")
    print("|---|---|---|---|---|")
    for s in run["steps"]:
        places = {p: n for (step, p), n in builds.items() if step == s["name"]}
        where = ", ".join(f"{p} {n}" for p, n in sorted(places.items())) or "-"
        batches = s.get("batches", "")
        print(f"| {s['name']} | {batches} | {s['records_out']} | {sum(places.values())}"
              f" | {where} |")  # fmt: skip
    steps = {s["name"] for s in run["steps"]}
    rest = {p: n for (step, p), n in builds.items() if step not in steps}
    if rest:
        print(f"outside a step's pass: {rest}")


def exports_plan() -> dict:
    """The chain's ingest straight into its exports, and a CSV file export: the consumers
    of a typed batch from the source to the exports, with no transform op between."""
    from drills.workload import import_plan

    steps = [s for s in import_plan(jsonl=True)["steps"] if s["type"] != "transform"]
    csv_file = {"target": "file", "path": "customers.csv", "format": "csv"}
    steps.append({"name": "to_csv", "type": "export", "depends_on": ["ingest"], "config": csv_file})
    for step in steps:
        if step.get("depends_on") == ["normalize"]:
            step["depends_on"] = ["ingest"]
    return {"steps": steps}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.builds", description=__doc__)
    parser.add_argument("--plan", choices=("chain", "exports", "flights", "all"), default="all")
    parser.add_argument("--executor", nargs=2, metavar=("NAME", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.executor:
        return counting_executor(*args.executor)
    if args.plan in ("chain", "exports", "all"):
        import tempfile

        from drills.workload import generate_csv, import_plan

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "customers.csv"
            generate_csv(path, 100_000)
            if args.plan != "exports":
                _measure("chain", import_plan(jsonl=True), {"customers.csv": path})
            if args.plan != "chain":
                _measure("exports", exports_plan(), {"customers.csv": path})
    if args.plan in ("flights", "all"):
        from bench.real_dag import PLAN
        from drills.datasets import flights_csv

        _measure("flights", PLAN, {"flights.csv": flights_csv()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
