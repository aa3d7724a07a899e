"""Where a run's CPU goes over time: a `CpuTimeline` samples, every `interval_s`, the CPU
ticks each process of a topology used (by role: `executor-1`, `coordinator`, ...) and each
process of the PostgreSQL server (by what its title says it does: `INSERT`, `EXECUTE`,
`idle`, `walwriter`, ...), and prints one line a sample. Used by `bench.real_dag
--timeline`; not a test. A process that exits between two samples loses its last ticks."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from bench.capacity import TICKS_PER_S, cpu_ticks
from drills.harness import run_sql
from drills.pgfailover import children
from drills.topology import Topology


def postmaster_pid(db_url: str) -> int:
    """The pid of the server `db_url` reaches (first line of its `postmaster.pid`)."""
    (data_dir,) = run_sql(db_url, "SHOW data_directory")[0]
    return int(Path(data_dir, "postmaster.pid").read_text().split()[0])


def server_role(pid: int) -> str:
    """`server <what it does>` from a server process's title (`postgres: 15/main: postgres
    db 127.0.0.1(5432) INSERT` -> `server INSERT`; a background process by its name)."""
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except (OSError, UnicodeDecodeError):
        return "server"
    if ")" in title:  # a client's session: its command is the title's last word
        return "server " + title.rsplit(" ", 1)[-1]
    return "server " + title.split(":")[-1].strip()


class CpuTimeline:
    """`with CpuTimeline(topo): ...` samples in a thread; `rows` holds (seconds since the
    start, Counter role -> CPU ticks in the interval) once the block ends."""

    def __init__(self, topo: Topology, interval_s: float = 0.25):
        self.topo, self.interval_s = topo, interval_s
        self.postmaster = postmaster_pid(topo.db_url)
        self.rows: list[tuple[float, Counter]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> CpuTimeline:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def _ticks(self) -> dict[int, tuple[str, int]]:
        roles = {pid: server_role(pid) for pid in children(self.postmaster)}
        roles.update(self.topo.processes())
        return {pid: (role, t) for pid, role in roles.items() if (t := cpu_ticks(pid)) is not None}

    def _loop(self) -> None:
        started, before = time.monotonic(), self._ticks()
        while not self._stop.wait(self.interval_s):
            now = self._ticks()
            used: Counter = Counter()
            for pid, (role, ticks) in now.items():
                used[role] += ticks - before.get(pid, (role, 0))[1]
            self.rows.append((time.monotonic() - started, +used))
            before = now

    def print(self) -> None:
        """A line a sample: the cores in use, then each role's share of a core, largest first."""
        print(f"\nCPU every {self.interval_s:g} s (cores in use: each role's share of a core):")
        for at, used in self.rows:
            cores = sum(used.values()) / TICKS_PER_S / self.interval_s
            parts = "  ".join(
                f"{role} {ticks / TICKS_PER_S / self.interval_s:.2f}"
                for role, ticks in used.most_common(6)
            )
            print(f"  {at:6.2f} s  {cores:4.2f}  {parts}")
