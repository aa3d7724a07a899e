"""`python -m bench.cli_startup [--runs N]`: how long the `etl` command takes to start, and
how many modules its client commands import, against the interpreter's own start measured in
the same run (the baseline). Not a test: nothing asserts; it prints the median of N runs
and the range of each figure.

Timed as whole processes: `python -c pass` (baseline), `etl --help`, `etl runs list --help`
and `etl validate PLAN` (an offline command). The module count is that of a process that
parsed `etl runs list` and imported its command module, with the heavy server-side
packages it must not load listed."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ETL = [sys.executable, "-m", "service"]
SERVER_SIDE = ("dramatiq", "dramatiq_pg", "psycopg2", "apscheduler", "falcon", "actors")
COUNT = """
import importlib, sys
from service.cli.main import COMMANDS, build_parser
argv = ["runs", "list"]
build_parser(argv).parse_args(argv)
importlib.import_module(COMMANDS["runs"].module)
print(len(sys.modules), ",".join(m for m in {server} if m in sys.modules) or "none")
"""


def _time(argv: list[str], runs: int) -> list[float]:
    took = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
        took.append(time.perf_counter() - began)
    return took


def _line(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"{name:<34} median {statistics.median(ms):7.1f} ms  range {ms[0]:6.1f}-{ms[-1]:6.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    plan = ROOT / "fixtures" / "plans" / "customers.json"
    cases = {
        "python -c pass (baseline)": [sys.executable, "-c", "pass"],
        "etl --help": [*ETL, "--help"],
        "etl runs list --help": [*ETL, "runs", "list", "--help"],
        "etl validate fixtures/plans/...": [*ETL, "validate", str(plan)],
    }
    print(f"{args.runs} runs each, whole processes")
    for name, argv in cases.items():
        print(_line(name, _time(argv, args.runs)))
    code = COUNT.format(server=repr(SERVER_SIDE))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
    modules, loaded = out.stdout.decode().split()
    print(f"etl runs list imports {modules} modules; server-side packages among them: {loaded}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
