"""The drill harness: a seeded CSV generator, a private local topology (`etl up` on a fresh
database with its own directories), a JSON client of the API, a /proc memory sampler and
the report files. `service.drills` runs the scenarios on it; `bench/` reuses it."""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg2

from service.config import Config

ROOT = Path(__file__).resolve().parents[1]
DRILL_TOKEN = "drill-admin-token-0123456789abcdef"
FAST_TIMINGS = {"ETL_LEASE_TTL_S": "3", "ETL_HEARTBEAT_S": "1", "ETL_SWEEP_S": "0.5"}
TERMINAL = ("succeeded", "failed", "canceled")
CSV_SEED = 20261129
BATCH = 500  # records per batch (SPEC: Execution guarantees)
COLUMNS = {"id": "int", "amount": "int", "signup": "date"}  # declared; the rest is inferred
_FIRST = ["Anna", "Boris", "Chen", "Dana", "Emil", "Fatima", "Goran", "Hana", "Ivan", "Jo"]
_LAST = ["Smith", "Ivanova", "Okafor", "Novak", "Garcia", "Kowalski", "Tanaka", "Berg"]
_CITY = ["Lisbon", "Riga", "Oslo", "Porto", "Tallinn", "Krakow", "Ghent", "Turku", "Bern"]


def now_utc() -> datetime:
    return datetime.now(UTC)


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat(timespec="milliseconds")


def parse_ts(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value.replace("Z", "+00:00"))


def seconds(start: str | datetime | None, end: str | datetime | None) -> float | None:
    """`end - start` in seconds (ISO strings or datetimes), None if either is missing."""
    a = parse_ts(start) if isinstance(start, str) else start
    b = parse_ts(end) if isinstance(end, str) else end
    return None if a is None or b is None else round((b - a).total_seconds(), 3)


def generate_csv(path: Path, records: int, *, seed: int = CSV_SEED) -> dict[str, int]:
    """Write `records` seeded customer rows (`id,name,email,amount,signup,city,note`, ~120
    bytes each): ~2% with a quoted multi-line note, ~1% with doubled quotes, names with
    extra white space. The same seed and size always give the same bytes."""
    rng = random.Random(seed)
    multiline = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["id", "name", "email", "amount", "signup", "city", "note"])
        for i in range(1, records + 1):
            first, last = rng.choice(_FIRST), rng.choice(_LAST)
            name = f"{first} {last}"
            if rng.random() < 0.3:
                name = f"  {first}   {last}\t"  # for normalize_whitespace to collapse
            roll = rng.random()
            note = f"customer since {rng.randint(2001, 2025)}, tier {rng.choice('ABCD')}, ref "
            note += str(rng.randint(10_000_000, 99_999_999))
            if roll < 0.02:
                note = f"first line of note {i}\nsecond line, with a comma\n  third  line"
                multiline += 1
            elif roll < 0.03:
                note = f'said "hello" and "bye" on visit {i}'
            signup = f"{rng.randint(2001, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            email = f"{first.lower()}.{last.lower()}{i}@example.org"
            amount = rng.randint(-5000, 2_000_000)
            out.writerow([i, name, email, amount, signup, rng.choice(_CITY), note])
    return {"records": records, "multiline": multiline, "bytes": path.stat().st_size}


def import_plan(*, jsonl: bool = True) -> dict:
    """ingest -> normalize_whitespace -> export to `sandbox.customers` (key id) [and to a
    JSONL file]: the pipeline of import-100k, crash-after-export and the benchmark."""
    steps = [
        {"name": "ingest", "type": "ingest",
         "config": {"source": "file", "path": "customers.csv", "columns": COLUMNS}},
        {"name": "normalize", "type": "transform", "depends_on": ["ingest"],
         "config": {"op": "normalize_whitespace", "columns": ["name", "note"]}},
        {"name": "to_table", "type": "export", "depends_on": ["normalize"],
         "config": {"target": "table", "table": "customers", "key": "id"}},
        {"name": "to_file", "type": "export", "depends_on": ["normalize"],
         "config": {"target": "file", "path": "customers.jsonl", "format": "jsonl"}},
    ]  # fmt: skip
    return {"on_failure": "stop_dependents", "steps": steps if jsonl else steps[:3]}


# --- the topology ----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _proc_info(pid: int) -> tuple[int, int, list[str]] | None:
    """(ppid, session id, argv) of a live process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    argv = [c.decode(errors="replace") for c in cmd if c]
    # no argv: a zombie, or a child between fork and exec; neither is worth a sample
    return (int(fields[1]), int(fields[3]), argv) if argv else None


def session_processes(sid: int) -> dict[int, tuple[int, list[str]]]:
    """Every live process of session `sid`: pid -> (ppid, argv). A session, not the process
    tree, so that a child orphaned by a killed parent is still found."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (info := _proc_info(int(entry))) is not None and info[1] == sid:
            found[int(entry)] = (info[0], info[2])
    return found


def role_of(argv: list[str], parent_argv: list[str] | None) -> str:
    """A process's role in the topology, from its argv and its parent's (None: the parent
    is outside the topology, i.e. the process was orphaned)."""
    text = " ".join(argv)
    orphan = " (orphaned)" if parent_argv is None and "up" not in argv else ""
    if "gunicorn" in text:
        master = "gunicorn" not in " ".join(parent_argv or [])
        return ("gunicorn master" if master else "gunicorn worker") + orphan
    for i, arg in enumerate(argv[:-1]):
        if arg in ("--name", "--profile-executor"):
            return argv[i + 1] + orphan
    if "coordinator" in argv:
        return "coordinator" + orphan
    return "up (supervisor)" if "up" in argv else text[:60]


class Topology:
    """`etl up` (or other `roots` commands) on database `etl_drill_<name>_<pid>`, with
    data/export/reject directories under `var/drills/<name>/`. `start()` migrates, seeds
    and waits for /health; `stop()` stops the processes and drops the database."""

    def __init__(self, name: str, *, fast: bool, env: dict[str, str] | None = None):
        self.name = name
        self.dir = ROOT / "var" / "drills" / name
        self.data, self.exports, self.rejects = (
            self.dir / d for d in ("data", "exports", "rejects")
        )
        self.db_name = f"etl_drill_{name.replace('-', '_')}_{os.getpid()}"
        self.server_url = Config.from_env().database_url.rsplit("/", 1)[0]
        self.db_url = f"{self.server_url}/{self.db_name}"
        self.port = _free_port()
        self.topology_env = {
            "ETL_DATABASE_URL": self.db_url,
            "ETL_SANDBOX_URL": self.db_url,
            "ETL_DATA_DIR": str(self.data),
            "ETL_EXPORT_DIR": str(self.exports),
            "ETL_REJECT_DIR": str(self.rejects),
            "ETL_API_BIND": f"127.0.0.1:{self.port}",
            "ETL_ADMIN_TOKEN": DRILL_TOKEN,
            **(FAST_TIMINGS if fast else {}),
            **(env or {}),
        }
        self.env = {**os.environ, **self.topology_env}
        self.roots: dict[str, subprocess.Popen] = {}
        self.log_path = self.dir / "up.log"
        self.sampler = MemorySampler(self)

    def etl(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "service", *args],
            env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"etl {' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def prepare(self) -> None:
        """Fresh directories and a fresh, migrated, seeded database."""
        shutil.rmtree(self.dir, ignore_errors=True)
        for d in (self.data, self.exports, self.rejects):
            d.mkdir(parents=True)
        self.drop_database()
        self.etl("migrate")
        self.etl("seed")

    def start(self, roots: dict[str, list[str]] | None = None) -> Topology:
        """Start `roots` (default: `etl up`), each in its own session, and wait for /health."""
        roots = roots or {"up": [sys.executable, "-m", "service", "up"]}
        log = self.log_path.open("ab")
        for name, argv in roots.items():
            self.roots[name] = subprocess.Popen(
                argv, env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.sampler.start()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if self.call("GET", "/health")[0] == 200:
                    return self
            except OSError:
                pass
            for name, proc in self.roots.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}: {self.log_tail()}")
            time.sleep(0.2)
        raise RuntimeError(f"the API did not become healthy: {self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM every root (its whole group after a grace period), stop sampling, drop
        the database."""
        for proc in self.roots.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.roots.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # leftovers (e.g. an orphaned child)
            except ProcessLookupError:
                pass
        self.roots.clear()
        self.sampler.stop()
        self.drop_database()

    def drop_database(self) -> None:
        conn = psycopg2.connect(f"{self.server_url}/postgres")
        conn.autocommit = True  # the name is ours: etl_drill_<name>_<pid>
        conn.cursor().execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
        conn.close()

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def processes(self) -> dict[int, str]:
        """pid -> role of every live process of the topology (its roots' sessions)."""
        found: dict[int, tuple[int, list[str]]] = {}
        roots_now = list(self.roots.values())  # the drill thread may add a root meanwhile
        for proc in roots_now:
            found.update(session_processes(proc.pid))
        roots = {p.pid for p in roots_now}
        return {
            pid: role_of(argv, [] if pid in roots else found.get(ppid, (0, None))[1])
            for pid, (ppid, argv) in found.items()
        }

    def kill(self, role: str) -> dict[str, Any]:
        """SIGKILL the live process with `role`; what was killed, and when."""
        pid = self.pid_of(role)
        at = now_utc()
        os.kill(pid, signal.SIGKILL)
        return {"process": role, "pid": pid, "killed_at": iso(at)}

    def pid_of(self, role: str) -> int:
        """The pid of the live process with `role` (`executor-1`, `coordinator`, ...)."""
        pids = [pid for pid, r in self.processes().items() if r == role]
        if len(pids) != 1:
            raise RuntimeError(f"expected one live {role} process, found {pids}")
        return pids[0]

    def sql(self, query: str, *args: Any) -> list[tuple]:
        conn = psycopg2.connect(self.db_url, application_name="etl-drill")
        try:
            with conn.cursor() as cur:
                cur.execute(query, args or None)
                rows = cur.fetchall() if cur.description else []
            conn.commit()
            return rows
        finally:
            conn.close()

    def wait_for(self, predicate: Any, *, timeout: float, what: str, every: float = 0.05) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if value := predicate():
                return value
            time.sleep(every)
        raise TimeoutError(f"{what}: not reached in {timeout:g} s\n{self.log_tail()}")

    def wait_run(self, run_id: str, *, timeout: float = 300) -> dict:
        def done() -> dict | None:
            try:
                run = self.run(run_id)
            except OSError:  # the API restarts with a killed coordinator: ask again
                return None
            return run if run["status"] in TERMINAL else None

        return self.wait_for(done, timeout=timeout, what=f"run {run_id} finished", every=0.1)

    # --- the API (JSON, `Authorization: Bearer`) ---
    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {DRILL_TOKEN}", "Content-Type": "application/json"}
        url = f"http://127.0.0.1:{self.port}" + ("" if path == "/health" else "/api/v1") + path
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def create(self, name: str, plan: dict) -> str:
        code, body = self.call("POST", "/pipelines", {"name": name, "plan": plan})
        if code != 201:
            raise RuntimeError(f"creating pipeline {name}: {code} {body}")
        return body["id"]

    def trigger(self, pipeline_id: str, key: str | None = None) -> tuple[int, dict]:
        body = {"trigger_key": key} if key else {}
        return self.call("POST", f"/pipelines/{pipeline_id}/runs", body)

    def run(self, run_id: str) -> dict:
        code, body = self.call("GET", f"/runs/{run_id}")
        if code != 200:
            raise RuntimeError(f"GET /runs/{run_id}: {code} {body}")
        return body


def concurrently(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run `calls` in threads released together by a barrier; their results in order."""
    barrier, results = threading.Barrier(len(calls)), [None] * len(calls)

    def go(i: int) -> None:
        barrier.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


# --- memory ----------------------------------------------------------------------------------


def _status_kib(pid: int) -> tuple[int, int, int] | None:
    """(VmRSS, VmHWM, RssAnon) of a live process in KiB, or None."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    fields = (line.partition(":") for line in lines)
    kib = {k: int(v.split()[0]) for k, _, v in fields if k in ("VmRSS", "VmHWM", "RssAnon")}
    return kib.get("VmRSS", 0), kib.get("VmHWM", 0), kib.get("RssAnon", 0)


class MemorySampler:
    """Every `interval_s`, from a background thread: VmRSS/VmHWM/RssAnon of every process
    of the topology and of the drill database's PostgreSQL backends; the peak per pid.
    VmHWM is the kernel's own peak, so a spike between two samples is not missed."""

    def __init__(self, topology: Topology, interval_s: float = 0.2):
        self.topology = topology
        self.interval_s = interval_s
        self.peaks: dict[int, list] = {}  # pid -> [role, first seen, rss, hwm, anon]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self) -> None:
        conn, backends, tick = None, {}, 0
        query = (
            "SELECT pid, 'postgres backend (' || coalesce(nullif(application_name, ''),"
            " backend_type) || ')' FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()"
        )
        while not self._stop.wait(self.interval_s):
            if tick % 5 == 0:  # backends come and go rarely; the catalog is not free
                try:
                    if conn is None:
                        conn = psycopg2.connect(f"{self.topology.server_url}/postgres")
                        conn.autocommit = True
                    with conn.cursor() as cur:
                        cur.execute(query, (self.topology.db_name,))
                        backends = dict(cur.fetchall())
                except psycopg2.Error:
                    conn = None
            tick += 1
            for pid, role in {**self.topology.processes(), **backends}.items():
                self.sample(pid, role)
        if conn is not None:
            conn.close()

    def sample(self, pid: int, role: str) -> None:
        if (kib := _status_kib(pid)) is None:
            return
        peak = self.peaks.setdefault(pid, [role, time.monotonic(), 0, 0, 0])
        peak[0] = role  # e.g. a gunicorn master that became an orphan
        peak[2:] = [max(a, b) for a, b in zip(peak[2:], kib, strict=True)]

    def table(self) -> list[dict[str, Any]]:
        """Peaks in MiB, one row per process; coordinator/executor incarnations numbered."""
        rows, seen = [], Counter()
        for pid, (role, _, rss, hwm, anon) in sorted(self.peaks.items(), key=lambda p: p[1][:2]):
            seen[role] += 1
            label = f"{role} #{seen[role]}" if role.startswith(("executor", "coord")) else role
            mib = {
                "peak_rss_mib": round(max(rss, hwm) / 1024, 1),
                "peak_anon_mib": round(anon / 1024, 1),
            }
            rows.append({"process": label, "pid": pid, **mib})
        return rows


# --- results and the report ------------------------------------------------------------------


@dataclass
class DrillResult:
    """What one drill did and found: checks (each PASS/FAIL), runs, figures, peak memory."""

    name: str
    command: str
    env: dict[str, str]
    started_at: str = field(default_factory=lambda: iso(now_utc()) or "")
    finished_at: str | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    memory: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def check(self, name: str, passed: bool, detail: Any = "") -> bool:
        self.checks.append({"check": name, "passed": bool(passed), "detail": str(detail)[:500]})
        return bool(passed)

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.checks) and all(c["passed"] for c in self.checks)

    def expect(self, name: str, got: Any, want: Any) -> bool:
        """A check that `got == want`; the report shows what was got."""
        return self.check(f"{name}: {want}", got == want, got)

    def add_run(self, label: str, run: dict) -> None:
        """Keep a run's ids and the timings of every step and attempt (API timestamps)."""
        steps = [
            {
                **_timed(s, "name", "status", "records_in", "records_out", "rejected"),
                "attempts": [_timed(a, "number", "executor", "outcome") for a in s["attempts"]],
            }
            for s in run.get("steps", [])
        ]
        ids = _timed(run, "id", "trace_id", "status", "created_at")
        self.runs.append({"label": label, **ids, "steps": steps})

    def finish(self, memory: list[dict[str, Any]]) -> None:
        self.memory, self.finished_at = memory, iso(now_utc())

    @property
    def duration_s(self) -> float | None:
        return seconds(self.started_at, self.finished_at)

    def as_dict(self) -> dict[str, Any]:
        verdict = "PASS" if self.passed else "FAIL"
        return {"verdict": verdict, "duration_s": self.duration_s, **asdict(self)}


def _timed(d: dict, *keys: str) -> dict[str, Any]:
    """`keys` of `d` plus its start/finish timestamps and the duration between them."""
    start, end = d.get("started_at"), d.get("finished_at")
    picked = {k: d.get(k) for k in keys}
    return {**picked, "started_at": start, "finished_at": end, "duration_s": seconds(start, end)}
