"""A drill's topology: `etl up` on a database of its own (`etl_drill_<name>_<pid>`) with
directories under `var/drills/<name>/`, the role of every live process (to kill one by
role), and a memory sampler over all of them."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from drills.harness import ROOT, Stack, drop_database, now_utc
from drills.memory import MemorySampler
from drills.pgcluster import PrivateCluster
from drills.pgfailover import FailoverPair
from drills.report import iso
from service.config import Config

DRILL_TOKEN = "drill-admin-token-0123456789abcdef"


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


class Topology(Stack):
    """`etl up` (or other `roots` commands) on database `etl_drill_<name>_<pid>`, with
    data/export/reject directories under `var/drills/<name>/`. `prepare()` makes them fresh
    (migrated, seeded), `start()` waits for /health, `stop()` stops the processes and drops
    the database."""

    def __init__(
        self,
        name: str,
        *,
        fast: bool,
        env: dict[str, str] | None = None,
        cluster: PrivateCluster | FailoverPair | None = None,
    ):
        # A drill that restarts PostgreSQL runs on a private cluster, never the user's server.
        self.cluster = cluster
        server_url = cluster.url if cluster else Config.from_env().database_url.rsplit("/", 1)[0]
        db_name = f"etl_drill_{name.replace('-', '_')}_{os.getpid()}"
        directory = ROOT / "var" / "drills" / name
        shutil.rmtree(directory, ignore_errors=True)
        query = getattr(cluster, "url_query", "")  # a multi-host URL's target_session_attrs
        super().__init__(
            f"{server_url}/{db_name}{query}", directory, fast=fast, env=env, token=DRILL_TOKEN
        )
        self.name = name
        self.log_path = self.dir / "up.log"
        self.sampler = MemorySampler(self)

    def prepare(self) -> None:
        """A fresh, migrated, seeded database."""
        self.drop_database()
        self.etl("migrate")
        self.etl("seed")

    def start(self, roots: dict[str, list[str]] | None = None) -> Topology:  # type: ignore[override]
        """Start `roots` (default: `etl up`), each in its own session, and wait for /health."""
        roots = roots or {"up": [sys.executable, "-m", "service", "up"]}
        with self.log_path.open("ab") as log:
            for name, argv in roots.items():
                self.procs[name] = subprocess.Popen(
                    argv, env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
                self.logs[name] = self.log_path
        self.sampler.start()
        self.wait_healthy()
        return self

    def stop(self) -> None:
        """Stop the processes and the sampler, drop the database (remove the private
        cluster, if the topology has one)."""
        super().stop()
        self.sampler.stop()
        if self.cluster is not None:
            self.cluster.destroy()
        else:
            self.drop_database()

    def drop_database(self) -> None:
        drop_database(self.server_url, self.db_name)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def processes(self) -> dict[int, str]:
        """pid -> role of every live process of the topology (its roots' sessions)."""
        found: dict[int, tuple[int, list[str]]] = {}
        roots_now = list(self.procs.values())  # the drill thread may add a root meanwhile
        for proc in roots_now:
            found.update(session_processes(proc.pid))
        roots = {p.pid for p in roots_now}
        return {
            pid: role_of(argv, [] if pid in roots else found.get(ppid, (0, None))[1])
            for pid, (ppid, argv) in found.items()
        }

    def pause(self, paused: bool = True) -> None:
        """Stop (SIGSTOP) or continue (SIGCONT) every process of the topology but the API's,
        so a benchmark's other stacks do no work while one contender runs: idle, a stack's
        executors and coordinator kept its database sessions at about 4 % of a core. The
        API is left running: its workers, stopped longer than gunicorn's 30 s timeout, would
        be killed by its master as it continues."""
        for pid, role in self.processes().items():
            if not role.startswith("gunicorn"):
                os.kill(pid, signal.SIGSTOP if paused else signal.SIGCONT)

    def kill_role(self, role: str) -> dict[str, Any]:
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
