"""`python -m bench.million [--repeat 5] [--kills 1]`: 1,000,000 records through the
100,000-record chain of `bench.import_100k` (ingest CSV -> normalize_whitespace -> table
export keyed by `id`), against the 100,000-record run of the same rounds. Not a test:
nothing here asserts.

The input: the seeded CSV of `drills.workload.generate_csv` at 1,000,000 records (about
115 MiB) is more than one file may hold (`MAX_SOURCE_BYTES`, 50 MiB), so the records are
split into 10 files of 100,000 (header each, 11.2 MiB) under `m1/` and read by one glob
ingest (`m1/part-*.csv`: one input, in name order). The 100,000-record run reads the first
of those files through the same glob form (`k100/part-*.csv`).

One `etl up` topology with production timings (`drills.topology.Topology`, two executors).
After one 100,000-record run not counted, each round runs the 100,000-record plan, then the
1,000,000-record plan, the table emptied before each (untimed); a run is timed from the POST
of its trigger to its `finished_at`.
Printed: medians of the rounds with their range, the time per row of each size and their
ratio per round. Executor memory: every 100 ms, VmRSS of every live executor process
(`/proc/PID/status`); per run its peak and its peak in each tenth of the run's time (flat
or growing), and VmHWM (restarted before each run through `/proc/PID/clear_refs`).

`--kills N` then runs the 1,000,000-record plan N more times with the executor holding the
table export's attempt SIGKILLed at half its batches (`bench.scale`'s killed run: the lease
runs out, the step goes on elsewhere from its checkpoint). Printed: the table's rows,
distinct keys and distinct ids (exactly 1,000,000 each), and the batches each attempt
committed: their sum is the batches of a clean run when no committed batch was redone (the
crash tests' check, `tests/integration/actors/test_crash.py`)."""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import threading
import time
from itertools import islice
from pathlib import Path

from bench.import_100k import _load, run_pipeline
from bench.peers_100k import _retried
from bench.scale import _killed_run
from drills.memory import _status_kib, reset_peak
from drills.topology import Topology
from drills.workload import generate_csv, import_plan

RECORDS = 1_000_000
PER_FILE = 100_000
TARGETS = {"per_row_ratio": 1.1, "rss_mib": 100.0}
ROWS = (
    "SELECT count(*), count(DISTINCT record_key), count(DISTINCT id) FROM sandbox.customers"
    " WHERE run_id = %s"
)
EMPTY = (  # the table export creates the table on its first run
    "DO $$ BEGIN IF to_regclass('sandbox.customers') IS NOT NULL THEN"
    " TRUNCATE sandbox.customers; END IF; END $$"
)
ATTEMPTS = (
    "SELECT number, split_part(executor, ':', 1), outcome, batches_done FROM attempts"
    " WHERE run_id = %s AND step_name = 'to_table' ORDER BY number"
)


def split_input(data: Path, records: int = RECORDS) -> dict:
    """The seeded 1,000,000-record CSV as `m1/part-00.csv` .. `part-09.csv` (100,000 records
    each, whole records: a quoted multi-line note stays in one file), and `k100/part-00.csv`
    a copy of the first; the sizes."""
    whole = data / "whole.csv"
    info = generate_csv(whole, records)
    (data / "m1").mkdir()
    (data / "k100").mkdir()
    with whole.open(newline="", encoding="utf-8") as f:
        rows = csv.reader(f)
        header = next(rows)
        for part in range(records // PER_FILE):
            path = data / "m1" / f"part-{part:02d}.csv"
            with path.open("w", newline="", encoding="utf-8") as out:
                writer = csv.writer(out, lineterminator="\n")
                writer.writerow(header)
                writer.writerows(islice(rows, PER_FILE))
    whole.unlink()
    first = data / "m1" / "part-00.csv"
    (data / "k100" / "part-00.csv").write_bytes(first.read_bytes())
    sizes = [p.stat().st_size for p in sorted((data / "m1").iterdir())]
    return {**info, "bytes": sum(sizes), "largest": max(sizes)}


class RssTrace:
    """VmRSS (MiB) of the topology's executors every `interval_s`, from a thread: the pids
    looked up once a second (a restarted executor is a new pid), (time, pid, MiB) kept."""

    def __init__(self, topo: Topology, interval_s: float = 0.1):
        self.topo, self.interval_s = topo, interval_s
        self.samples: list[tuple[float, int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-trace", daemon=True)

    def executors(self) -> list[int]:
        return [pid for pid, role in self.topo.processes().items() if role.startswith("executor")]

    def _loop(self) -> None:
        pids, tick = self.executors(), 0
        while not self._stop.wait(self.interval_s):
            tick += 1
            if tick % 10 == 0:
                pids = self.executors()
            now = time.monotonic()
            for pid in pids:
                if (kib := _status_kib(pid)) is not None:
                    self.samples.append((now, pid, kib[0] / 1024))

    def __enter__(self) -> RssTrace:
        for pid in self.executors():  # VmHWM from now on: this run's peak
            reset_peak(pid)
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.ended = time.monotonic()
        self.hwm = {pid: kib[1] / 1024 for pid in self.executors() if (kib := _status_kib(pid))}

    def summary(self) -> dict:
        """Peak VmRSS over the run, per tenth of its time, and the largest VmHWM (MiB)."""
        span = max(self.ended - self.started, 1e-9)
        tenths = [0.0] * 10
        for at, _, mib in self.samples:
            i = min(int((at - self.started) / span * 10), 9)
            tenths[i] = max(tenths[i], mib)
        peak = max((mib for _, _, mib in self.samples), default=0.0)
        hwm = max(self.hwm.values(), default=0.0)
        return {"peak": peak, "tenths": [round(t) for t in tenths], "hwm": hwm}


def sql(topo: Topology, query: str, *args: object) -> list[tuple]:
    """`topo.sql`, again after a pause while the shared server has no session to spare."""
    return _retried(topo.sql, query, *args)


def timed_run(topo: Topology, pipeline: str, rows: int) -> dict:
    """The table emptied, one run traced: seconds, per-row us, memory, rows out."""
    sql(topo, EMPTY)
    with RssTrace(topo) as trace:
        took, run = run_pipeline(topo, pipeline, timeout_s=3600)
    out = sql(topo, ROWS, run["id"])[0]
    if tuple(out) != (rows, rows, rows):
        raise SystemExit(f"run {run['id']}: rows, keys, ids {out}, not {rows}")
    batches = sum(r[3] for r in sql(topo, ATTEMPTS, run["id"]))
    return {"s": took, "us_row": took / rows * 1e6, "batches": batches, **trace.summary()}


class Patient:
    """A topology whose `sql` waits out a server with no session to spare (other work on
    the shared server), for `bench.scale`'s killed run."""

    def __init__(self, topo: Topology):
        self.topo = topo

    def __getattr__(self, name: str) -> object:
        return getattr(self.topo, name)

    def sql(self, query: str, *args: object) -> list[tuple]:
        return sql(self.topo, query, *args)


def killed(topo: Topology, pipeline: str, records: int, clean_batches: int) -> dict:
    """One `records`-record run with the export's executor SIGKILLed half-way."""
    sql(topo, EMPTY)
    result: dict = {}
    with RssTrace(topo) as trace:
        run = _killed_run(Patient(topo), pipeline, records, result)  # type: ignore[arg-type]
    result["rows, distinct keys, distinct ids"] = tuple(sql(topo, ROWS, run["id"])[0])
    result["attempts (number, executor, outcome, batches_done)"] = sql(topo, ATTEMPTS, run["id"])
    result["batches committed / clean run"] = (
        sum(result["to_table batches_done per attempt"]),
        clean_batches,
    )
    result["executor peak VmRSS MiB"] = round(trace.summary()["peak"], 1)
    return result


def spread(values: list[float], fmt: str = ".2f") -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}} .. {max(values):{fmt}})"


def report(rounds: list[dict[str, dict]]) -> None:
    small, big = [r["k100"] for r in rounds], [r["m1"] for r in rounds]
    ratios = [b["us_row"] / s["us_row"] for s, b in zip(small, big, strict=True)]
    print(f"\n{'figure':<44}{'median (range)':<30}target")
    print(f"{'100,000 records, s':<44}{spread([s['s'] for s in small]):<30}")
    print(f"{'1,000,000 records, s':<44}{spread([b['s'] for b in big]):<30}")
    print(f"{'100,000: us per row':<44}{spread([s['us_row'] for s in small], '.1f'):<30}")
    print(f"{'1,000,000: us per row':<44}{spread([b['us_row'] for b in big], '.1f'):<30}")
    verdict = "met" if statistics.median(ratios) <= TARGETS["per_row_ratio"] else "MISSED"
    print(f"{'per row, 1,000,000 / 100,000 (per round)':<44}{spread(ratios) + 'x':<30}"
          f"<= {TARGETS['per_row_ratio']}x {verdict}")  # fmt: skip
    for label, runs in (("100,000", small), ("1,000,000", big)):
        peak = [r["peak"] for r in runs]
        verdict = "met" if max(peak) <= TARGETS["rss_mib"] else "MISSED"
        print(f"{f'{label}: executor peak VmRSS, MiB':<44}{spread(peak, '.1f'):<30}"
              f"<= {TARGETS['rss_mib']:g} {verdict}")  # fmt: skip
        print(f"{f'{label}: executor VmHWM, MiB':<44}{spread([r['hwm'] for r in runs], '.1f')}")
    print("\nper round: seconds (100k, 1M), batches, peak VmRSS per tenth of the 1M run (MiB)")
    for i, (s, b) in enumerate(zip(small, big, strict=True), start=1):
        print(f"  {i}: {s['s']:.2f} s, {b['s']:.2f} s; batches {s['batches']}, {b['batches']};"
              f" {b['tenths']}")  # fmt: skip


def measure(topo: Topology, records: int, repeat: int, kills: int) -> None:
    """On the started `topology`: a warm-up, `repeat` rounds and their figures, then `kills`
    killed runs."""
    plans = {size: import_plan(jsonl=False, path=f"{size}/part-*.csv") for size in ("k100", "m1")}
    pipelines = {size: topo.create(f"million-{size}", plan) for size, plan in plans.items()}
    timed_run(topo, pipelines["k100"], PER_FILE)  # warm-up: imports, pools, the table
    rounds: list[dict[str, dict]] = []
    for i in range(repeat):
        found = {
            "k100": timed_run(topo, pipelines["k100"], PER_FILE),
            "m1": timed_run(topo, pipelines["m1"], records),
        }
        rounds.append(found)
        print(f"round {i + 1}: 100k {found['k100']['s']:.2f} s, 1M {found['m1']['s']:.2f} s,"
              f" peak VmRSS {found['k100']['peak']:.1f} / {found['m1']['peak']:.1f} MiB;"
              f" load {_load()}", flush=True)  # fmt: skip
    report(rounds)
    for _ in range(kills):
        result = killed(topo, pipelines["m1"], records, rounds[-1]["m1"]["batches"])
        print(f"killed run: {result}; load {_load()}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.million", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    for option, default, said in (
        ("--repeat", 5, "rounds (medians)"),
        ("--kills", 1, "killed 1,000,000-record runs"),
        ("--records", RECORDS, argparse.SUPPRESS),
    ):
        parser.add_argument(option, type=int, default=default, help=said)
    args = parser.parse_args()
    topo = Topology("bench-million", fast=False)
    topo.prepare()
    info = split_input(topo.data, args.records)
    print(f"input: {info['records']} records, {info['multiline']} multi-line, "
          f"{info['bytes'] / 2**20:.1f} MiB in {args.records // PER_FILE} files of at most "
          f"{info['largest'] / 2**20:.1f} MiB; {args.repeat} rounds; load {_load()}",
          flush=True)  # fmt: skip
    try:
        measure(topo.start(), args.records, args.repeat, args.kills)
    finally:
        topo.stop()
    print(f"load at the end: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
