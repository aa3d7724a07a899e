"""`python -m bench.preview`: wall time of `etl preview fixtures/plans/demo.json` as a user
runs it (a fresh process: interpreter start, imports, the preview, the rendering), median
of `--repeat` runs, plus the in-process preview alone. Target: under a second. Not a test:
nothing here asserts."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from actors.preview import preview_plan
from dag import parse_plan
from service.plandoc import read_plan_document

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "plans" / "demo.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.preview")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--records", type=int, default=100)
    args = parser.parse_args(argv)
    etl = Path(sys.executable).with_name("etl")
    command = [str(etl), "preview", str(DEMO), "--records", str(args.records)]
    walls = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, check=False)
        walls.append(time.perf_counter() - started)
        if done.returncode != 0:
            print(done.stdout.decode(), done.stderr.decode(), file=sys.stderr)
            return 1
    plan = parse_plan(read_plan_document(DEMO).plan)
    inner = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        preview_plan(
            plan,
            data_dir=ROOT / "fixtures",
            export_dir=ROOT / "var" / "exports",
            records=args.records,
        )
        inner.append(time.perf_counter() - started)
    print(f"etl preview {DEMO.relative_to(ROOT)} --records {args.records}")
    print(f"  command wall time, median of {args.repeat}: {statistics.median(walls):.3f} s")
    print(f"  preview_plan in process, median of {args.repeat}: {statistics.median(inner):.4f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
