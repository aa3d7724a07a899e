"""A PostgreSQL cluster of a drill's own: `initdb` in a temporary directory, started on a
free port with its socket in that directory, restarted and removed by the drill. The user's
server is never touched (a drill that restarts PostgreSQL restarts only this one)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

from drills.harness import free_port, now_utc

_OS_USER = "postgres"  # initdb refuses to run as root


def postgres_bin_dir() -> Path:
    """The directory of `initdb` and `pg_ctl`: on PATH, else the newest Debian-style
    `/usr/lib/postgresql/<major>/bin`."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent  # a symlink into the binaries directory
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]))
    if not dirs:
        raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl) found")
    return Path(dirs[-1])


class PrivateCluster:
    """One throw-away cluster: `start()` (initdb on first use), `stop()`, `restart()`,
    `destroy()`. Trust authentication for user `postgres`, listening on 127.0.0.1 only."""

    def __init__(self, bin_dir: Path | None = None):
        self.bin_dir = bin_dir or postgres_bin_dir()
        self.dir = Path(tempfile.mkdtemp(prefix="etl-drill-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.dir, _OS_USER, _OS_USER)

    def _run(self, *argv: str, timeout: float = 120) -> None:
        prefix = ["runuser", "-u", _OS_USER, "--"] if self._as_postgres else []
        done = subprocess.run(
            [*prefix, str(self.bin_dir / argv[0]), *argv[1:]],
            capture_output=True, text=True, timeout=timeout, cwd=self.dir,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stdout}{done.stderr}")

    def start(self) -> datetime:
        """Start the cluster (initdb first if it has none) and wait until it accepts
        connections; when it did."""
        if not self.data.exists():
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                      "--no-sync", "-E", "UTF8")  # fmt: skip
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"
            " -c fsync=off -c max_connections=200"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")  # fmt: skip
        return now_utc()

    def stop(self, mode: str = "fast") -> datetime:
        """Stop the cluster (`fast`: every session is terminated); when it was down."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")
        return now_utc()

    def restart(self, *, down_s: float) -> tuple[datetime, datetime]:
        """Stop, stay down `down_s` seconds, start again: (down at, back at)."""
        down = self.stop()
        time.sleep(down_s)
        return down, self.start()

    def destroy(self) -> None:
        """Stop the cluster if it runs and remove its directory."""
        try:
            self.stop(mode="immediate")
        except (RuntimeError, subprocess.TimeoutExpired):
            pass  # not running
        shutil.rmtree(self.dir, ignore_errors=True)
