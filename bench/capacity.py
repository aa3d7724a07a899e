"""`python -m bench.capacity`: the capacity curve (issue 37). For 1, 2, 4 and 8 executor
processes on this machine (one coordinator, production timings), each on a fresh topology:

- tiny runs (a 10-record ingest -> normalize -> JSONL export) on 24 pipelines, kept full
  (each pipeline topped up to its queue of 4 whenever the sampler sees room): runs per
  minute and steps per second, counted on the database's clock in consecutive windows
  (median and range); the 1-executor figures of the same run are the baseline;
- a 100,000-record import (the drills' import plan: table and JSONL export) on each of 8
  pipelines, all triggered at once: the seconds from the first trigger to the last run's
  end, and every run's rows and lines checked exactly;
- the CPU seconds of PostgreSQL (the backends of the bench's database) against those of the
  platform's processes over each phase, and the machine's load.

Speed is reported, never asserted. What it asserts is exactness at every size: the runs
and steps all succeed, at most 20 runs are active (queued or running) at any sample, and
per pipeline at most 1 runs and at most 4 are active; and every import has its 100,000 rows
and lines once."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import psycopg2

from bench.import_100k import _load
from drills.pgcluster import PrivateCluster
from drills.pgfailover import children
from drills.topology import Topology
from drills.workload import generate_csv, import_plan

SIZES = (1, 2, 4, 8)
TINY_PIPELINES = 24  # more than the global cap of 20 can hold running at once
IMPORTS = 8
IMPORT_RECORDS = 100_000
GLOBAL_CAP, PIPELINE_QUEUE = 20, 4
TICKS_PER_S = os.sysconf("SC_CLK_TCK")  # the unit of `cpu_ticks`
_ACTIVE = (
    "SELECT pipeline_id, count(*) FILTER (WHERE status = 'running'), count(*)"
    " FROM runs WHERE status IN ('queued', 'running') GROUP BY pipeline_id"
)


def tiny_plan() -> dict:
    steps = [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "tiny.csv", "columns": {"id": "int"}}},
        {"name": "normalize", "type": "transform", "depends_on": ["read"],
         "config": {"op": "normalize_whitespace", "columns": ["name"]}},
        {"name": "out", "type": "export", "depends_on": ["normalize"],
         "config": {"target": "file", "path": "tiny.jsonl", "format": "jsonl"}},
    ]  # fmt: skip
    return {"steps": steps}


class CapSampler:
    """Samples the active runs every 50 ms and keeps the peaks. With `pipelines`, one feeder
    thread per pipeline triggers it whenever the last sample shows room (its queue and the
    global cap not full), once per sample: the platform stays full without a stream of 429
    answers (a few still come, from feeders that saw the same room: the caps at work)."""

    def __init__(self, topo: Topology, pipelines: list[str] | None = None):
        self.topo = topo
        self.peaks = {"active": 0, "running_per_pipeline": 0, "active_per_pipeline": 0}
        self.triggers: dict[str, int] = {}
        self._sample_no, self._active, self._total, self._inflight = 0, {}, 0, 0
        self._changed = threading.Condition()
        self._stop, self.feeding = threading.Event(), threading.Event()
        self._threads = [threading.Thread(target=self._sample, daemon=True)]
        self._threads += [
            threading.Thread(target=self._feed, args=(p,), daemon=True) for p in pipelines or []
        ]
        self.feeding.set()

    def __enter__(self) -> CapSampler:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.feeding.clear()
        with self._changed:
            self._changed.notify_all()
        for t in self._threads:
            t.join(30)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                rows = self.topo.sql(_ACTIVE)
            except psycopg2.OperationalError:  # a sample missed (the caps are the API's)
                rows = []
            self.peaks["active"] = max(self.peaks["active"], sum(r[2] for r in rows))
            for key, i in (("running_per_pipeline", 1), ("active_per_pipeline", 2)):
                self.peaks[key] = max([self.peaks[key], *(r[i] for r in rows)])
            with self._changed:
                self._sample_no += 1
                self._active = {str(r[0]): r[2] for r in rows}
                self._total = sum(r[2] for r in rows)
                self._changed.notify_all()
            self._stop.wait(0.05)

    def _feed(self, pipeline: str) -> None:
        seen = -1
        while self.feeding.is_set():
            with self._changed:
                while self._sample_no == seen and not self._stop.is_set():
                    self._changed.wait()
                seen = self._sample_no
                room = self._total + self._inflight < GLOBAL_CAP
                room = room and self._active.get(pipeline, 0) < PIPELINE_QUEUE
                if not room or not self.feeding.is_set():
                    continue
                self._inflight += 1
            try:
                code = self.topo.trigger(pipeline)[0]
            except OSError:
                code = 0
            with self._changed:
                self._inflight -= 1
                self.triggers[str(code)] = self.triggers.get(str(code), 0) + 1

    def check(self) -> None:
        """The caps held at every sample (AssertionError naming the peak that did not)."""
        p = self.peaks
        assert p["active"] <= GLOBAL_CAP, f"{p['active']} runs active at once (cap {GLOBAL_CAP})"
        assert p["running_per_pipeline"] <= 1, f"{p} : two runs of a pipeline ran at once"
        assert p["active_per_pipeline"] <= PIPELINE_QUEUE, f"{p}: a pipeline's queue overflowed"


class CpuMeter:
    """CPU seconds of the bench's PostgreSQL cluster (its postmaster and every process it
    started) and of the platform's processes, sampled every 0.5 s from /proc (a process's
    time counts from its first sample: a session that comes and goes within 0.5 s is
    missed), and the peak of the cluster's client sessions."""

    def __init__(self, topo: Topology):
        self.topo = topo
        assert isinstance(topo.cluster, PrivateCluster)
        pid_file = topo.cluster.data / "postmaster.pid"
        self.postmaster = int(pid_file.read_text().split()[0])
        self.seen: dict[tuple[str, int], int] = {}
        self.first: dict[tuple[str, int], int] = {}
        self.peak_sessions = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.started = time.monotonic()

    def __enter__(self) -> CpuMeter:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)
        self.wall_s = time.monotonic() - self.started

    def _loop(self) -> None:
        while not self._stop.is_set():
            server = [self.postmaster, *children(self.postmaster)]
            self.peak_sessions = max(self.peak_sessions, len(server) - 6)  # minus its 6 own
            found = [("postgres", pid) for pid in server]
            found += [(_group(role), pid) for pid, role in self.topo.processes().items()]
            for key in found:
                if (ticks := cpu_ticks(key[1])) is not None:
                    self.first.setdefault(key, ticks)
                    self.seen[key] = ticks
            self._stop.wait(0.5)

    def seconds(self, kind: str) -> float:
        return sum(t - self.first[k] for k, t in self.seen.items() if k[0] == kind) / TICKS_PER_S

    def summary(self) -> dict:
        parts = {g: self.seconds(g) for g in ("coordinator", "api", "executors")}
        pg, platform = self.seconds("postgres"), sum(parts.values())
        return {
            **{f"{g}_cpu_s": round(v, 1) for g, v in parts.items()},
            "postgres_cpu_s": round(pg, 1),
            "platform_cpu_s": round(platform, 1),
            "postgres_share": round(pg / (pg + platform), 2) if pg + platform else None,
            "cores_busy": round((pg + platform) / self.wall_s, 2),
            "peak_sessions": self.peak_sessions,
        }


def _group(role: str) -> str:
    """The part of the platform a process of `role` is (`drills.topology.role_of`)."""
    if role.startswith("executor"):
        return "executors"
    return "api" if role.startswith("gunicorn") else "coordinator"


def cpu_ticks(pid: int) -> int | None:
    """User + system CPU of process `pid` so far, in clock ticks (None: gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def topology(executors: int) -> Topology:
    """A fresh `etl coordinator` + `executors` executor processes, production timings, on a
    PostgreSQL cluster of the bench's own: its CPU is the bench's alone, and the shared
    server's `max_connections` is not the bench's to use up."""
    cluster = PrivateCluster()
    cluster.start()
    topo = Topology(f"bench-capacity-{executors}", fast=False, cluster=cluster)
    topo.prepare()
    roots = {"coordinator": [sys.executable, "-m", "service", "coordinator"]}
    for i in range(1, executors + 1):
        roots[f"executor-{i}"] = [sys.executable, "-m", "service", "executor", "--name",
                                  f"executor-{i}"]  # fmt: skip
    (topo.data / "tiny.csv").write_text("id,name\n" + "".join(f"{i}, n  {i}\n" for i in range(10)))
    generate_csv(topo.data / "customers.csv", IMPORT_RECORDS)
    topo.start(roots)
    return topo


def _db_now(topo: Topology) -> str:
    return str(topo.sql("SELECT now()")[0][0])


def _done_between(topo: Topology, start: str, end: str) -> tuple[int, int]:
    """(runs, steps) that succeeded with `finished_at` in [start, end)."""
    runs = topo.sql("SELECT count(*) FROM runs WHERE status = 'succeeded'"
                    " AND finished_at >= %s AND finished_at < %s", start, end)  # fmt: skip
    steps = topo.sql("SELECT count(*) FROM step_runs WHERE status = 'succeeded'"
                     " AND finished_at >= %s AND finished_at < %s", start, end)  # fmt: skip
    return runs[0][0], steps[0][0]


def tiny_phase(topo: Topology, windows: int, window_s: float, warmup_s: float) -> dict:
    """Tiny runs kept coming on every pipeline: runs/min and steps/s per window."""
    pipelines = [topo.create(f"tiny-{i}", tiny_plan()) for i in range(TINY_PIPELINES)]
    rates: dict[str, list[float]] = {"runs_per_min": [], "steps_per_s": []}
    with CpuMeter(topo) as cpu, CapSampler(topo, pipelines) as caps:
        time.sleep(warmup_s)
        start = _db_now(topo)
        for _ in range(windows):
            time.sleep(window_s)
            end = _db_now(topo)
            runs, steps = _done_between(topo, start, end)
            rates["runs_per_min"].append(runs * 60 / window_s)
            rates["steps_per_s"].append(steps / window_s)
            start = end
        caps.feeding.clear()  # let what is admitted finish
        topo.wait_for(lambda: not topo.sql(_ACTIVE), timeout=600, what="tiny runs drained")
    caps.check()
    bad = topo.sql("SELECT status, count(*) FROM runs WHERE status NOT IN ('succeeded',"
                   " 'skipped') GROUP BY status")  # fmt: skip
    assert not bad, f"tiny runs that did not succeed: {bad}"
    return {**{k: _spread(v) for k, v in rates.items()}, "caps_peaks": caps.peaks,
            "triggers": caps.triggers, "cpu": cpu.summary()}  # fmt: skip


def import_phase(topo: Topology) -> dict:
    """A 100,000-record import on each of 8 pipelines, triggered at once; exact rows/lines."""
    pipelines = [topo.create(f"import-{i}", import_plan()) for i in range(IMPORTS)]
    with CpuMeter(topo) as cpu, CapSampler(topo) as caps:
        began = time.monotonic()
        run_ids = [topo.trigger(p)[1]["id"] for p in pipelines]
        runs = [topo.wait_run(r, timeout=3600) for r in run_ids]
        wall_s = time.monotonic() - began
    caps.check()
    for run in runs:
        assert run["status"] == "succeeded", run
        rows = topo.sql("SELECT count(*), count(DISTINCT id) FROM sandbox.customers"
                        " WHERE run_id = %s", run["id"])[0]  # fmt: skip
        lines = (topo.exports / run["id"] / "customers.jsonl").read_text().splitlines()
        ids = {json.loads(line)["id"] for line in lines}
        got = (rows, len(lines), len(ids))
        want = ((IMPORT_RECORDS, IMPORT_RECORDS), IMPORT_RECORDS, IMPORT_RECORDS)
        assert got == want, f"run {run['id']}: rows, lines, distinct ids {got}"
    return {
        "wall_s": round(wall_s, 1),
        "records_per_s": round(IMPORTS * IMPORT_RECORDS / wall_s),
        "run_s": _spread([_run_s(r) for r in runs]),
        "cpu": cpu.summary(),
    }


def _run_s(run: dict) -> float:
    from drills.report import seconds

    return seconds(run["created_at"], run["finished_at"]) or 0.0


def _spread(values: list[float]) -> str:
    """`median [min-max]` of `values`."""
    return f"{statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}]"


def measure(size: int, args: argparse.Namespace) -> dict:
    print(f"{size} executor(s): load {_load()}", flush=True)
    topo = topology(size)
    try:
        result = {"executors": size, "load_before": _load()}
        result["tiny"] = tiny_phase(topo, args.windows, args.window_s, args.warmup_s)
        if not args.tiny_only:
            result["imports"] = import_phase(topo)
        result["load_after"] = _load()
    finally:
        topo.stop()
    print(json.dumps(result), flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.capacity", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--windows", type=int, default=5, help="tiny-run windows (median)")
    parser.add_argument("--window-s", type=float, default=10.0)
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--tiny-only", action="store_true", help="skip the 8 imports")
    args = parser.parse_args()
    results = [measure(size, args) for size in args.sizes]
    base = results[0]["tiny"]
    print(f"\nbaseline: {results[0]['executors']} executor(s) of the same run")
    print(f"{'executors':>9} {'runs/min':>20} {'steps/s':>18} {'pg share':>8} "
          f"{'cores':>6} {'8x100k s':>9} {'rec/s':>8} {'pg share':>8}")  # fmt: skip
    for r in results:
        t, imp = r["tiny"], r.get("imports", {})
        print(f"{r['executors']:>9} {t['runs_per_min']:>20} {t['steps_per_s']:>18} "
              f"{t['cpu']['postgres_share']!s:>8} {t['cpu']['cores_busy']!s:>6} "
              f"{imp.get('wall_s', '-')!s:>9} {imp.get('records_per_s', '-')!s:>8} "
              f"{imp.get('cpu', {}).get('postgres_share', '-')!s:>8}")  # fmt: skip
    print(f"(baseline runs/min {base['runs_per_min']}; caps held at every size)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
