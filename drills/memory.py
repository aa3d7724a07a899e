"""Peak memory of a topology's processes and of its database's backends, sampled from
/proc in a background thread (the figures of the drill report and the benchmarks)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Protocol

import psycopg2

from ddl import KeptSession, connect


class Sampled(Protocol):
    """What the sampler watches: the topology's live processes and its database."""

    server_url: str
    db_name: str

    def processes(self) -> dict[int, str]: ...


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

    def __init__(self, topology: Sampled, interval_s: float = 0.2):
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
        session = KeptSession(
            lambda: connect(f"{self.topology.server_url}/postgres", "etl-drill-sampler")
        )
        backends, tick = {}, 0
        query = (
            "SELECT pid, 'postgres backend (' || coalesce(nullif(application_name, ''),"
            " backend_type) || ')' AS role FROM pg_stat_activity"
            " WHERE datname = %(db)s AND pid <> pg_backend_pid()"
        )
        while not self._stop.wait(self.interval_s):
            if tick % 5 == 0:  # backends come and go rarely; the catalog is not free
                try:
                    with session.transaction() as cur:
                        cur.execute(query, {"db": self.topology.db_name})
                        backends = {r["pid"]: r["role"] for r in cur.fetchall()}
                except psycopg2.Error:
                    session.close()
            tick += 1
            for pid, role in {**self.topology.processes(), **backends}.items():
                self.sample(pid, role)
        session.close()

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


def status_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a live process in MiB."""
    kib = _status_kib(pid)
    if kib is None:
        raise ProcessLookupError(pid)
    return kib[0] / 1024, kib[1] / 1024


def reset_peak(pid: int) -> None:
    """Start `pid`'s VmHWM again from its current RSS (`/proc/PID/clear_refs`, 5), so that
    the peak of each of a long-lived process's requests is measured on its own."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def child_pids(parent: int) -> list[int]:
    """The live child processes of `parent` (a gunicorn master's: its workers)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            pids.append(int(stat.parent.name))
    return pids
