"""A primary and its streaming replica of a drill's own (Debian's PostgreSQL binaries twice:
`initdb`, then `pg_basebackup -R` from it), each on a port of its own, reached through one
libpq multi-host URL with `target_session_attrs=read-write`: every new session lands on
whichever of the two accepts writes. The drill kills the primary (SIGKILL, every process of
it at once, as a lost machine) and promotes the replica. Asynchronous replication: a commit
the primary acknowledged may not have reached the replica when the primary dies."""

from __future__ import annotations

import os
import shutil
import signal
from datetime import datetime
from pathlib import Path

from drills.harness import now_utc, run_sql
from drills.pgcluster import PrivateCluster


def children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (a postmaster's backends and workers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(entry))
    return found


class FailoverPair:
    """`start()` the primary, then the replica streaming from it; `kill_primary()`,
    `promote()`, `destroy()`. `url` is the server part of the multi-host URL and
    `url_query` its parameters (appended after the database name)."""

    url_query = "?target_session_attrs=read-write"

    def __init__(self):
        self.primary = PrivateCluster()
        self.replica = PrivateCluster(self.primary.bin_dir)
        self.url = (
            f"postgresql://postgres@127.0.0.1:{self.primary.port},127.0.0.1:{self.replica.port}"
        )
        self.port = f"{self.primary.port},{self.replica.port}"
        self.dir = self.primary.dir

    def start(self) -> datetime:
        """Start the primary (initdb first), base-back it up into the replica (`-R`: a
        standby streaming from it) and start the replica; when both run."""
        self.primary.start()
        self.replica._run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres",
            "-D", str(self.replica.data), "-R", "-X", "stream", "--no-sync",
        )  # fmt: skip
        return self.replica.start()

    def postmaster_pid(self, cluster: PrivateCluster) -> int:
        return int((cluster.data / "postmaster.pid").read_text().split()[0])

    def kill_primary(self) -> datetime:
        """SIGKILL the primary's postmaster and every process it started, at once: stopped
        first (it forks nothing more), its children killed, then itself. When it was done."""
        pid = self.postmaster_pid(self.primary)
        os.kill(pid, signal.SIGSTOP)
        for child in children(pid):
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.kill(pid, signal.SIGKILL)
        return now_utc()

    def pause_replication(self) -> None:
        """Stop the replica (fast): what the primary commits from here on never reaches it,
        as with a replica that lags. `promote()` starts it again first."""
        self.replica.stop()

    def promote(self) -> datetime:
        """Promote the replica (started first if stopped) to a primary; when it accepts
        writes."""
        if not (self.replica.data / "postmaster.pid").exists():
            self.replica.start()
        self.replica._run("pg_ctl", "-D", str(self.replica.data), "-w", "-t", "60", "promote")
        return now_utc()

    def destroy(self) -> None:
        """Stop both (whatever is left of them) and remove their directories."""
        for cluster in (self.primary, self.replica):
            try:
                pid = self.postmaster_pid(cluster)
                os.kill(pid, signal.SIGCONT)
            except (OSError, ValueError):
                pass
            cluster.destroy()
            shutil.rmtree(cluster.dir, ignore_errors=True)

    def log(self) -> str:
        """The tails of both servers' logs."""
        out = []
        for role, cluster in (("primary", self.primary), ("replica", self.replica)):
            path = cluster.dir / "server.log"
            if path.exists():
                out.append(f"--- {role}\n{path.read_text(errors='replace')[-2000:]}")
        return "\n".join(out)


def wal_receiver_running(cluster: PrivateCluster) -> bool:
    """Whether `cluster` (a standby) streams from its primary right now."""
    query = "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'"
    return run_sql(f"{cluster.url}/postgres", query)[0][0] == 1
