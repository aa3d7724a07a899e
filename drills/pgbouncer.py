"""A PgBouncer of a test's own (Debian's `pgbouncer`), in front of the PostgreSQL at
`server_url`, on a free loopback port: started in transaction pooling, the way most teams
front a shared PostgreSQL, and stopped by the test. It runs as `postgres` when we are root
(PgBouncer refuses to run as root)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from drills.harness import free_port

_OS_USER = "postgres"


class PgBouncer:
    """`with PgBouncer(server_url) as bouncer:` then `bouncer.url(database)`."""

    def __init__(self, server_url: str, *, pool_mode: str = "transaction"):
        target = urlsplit(server_url)
        self.user = target.username or "postgres"
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="etl-pgbouncer-"))
        (self.dir / "users.txt").write_text(f'"{self.user}" ""\n')
        (self.dir / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={target.hostname or '127.0.0.1'} port={target.port or 5432}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            f"unix_socket_dir =\nauth_type = trust\nauth_file = {self.dir / 'users.txt'}\n"
            f"pool_mode = {pool_mode}\ndefault_pool_size = 20\nmax_client_conn = 200\n"
            # psycopg2 sends none of them unasked; our sessions' `options` (time zone and
            # timeouts) are dropped by PgBouncer 1.18, which cannot forward them
            "ignore_startup_parameters = extra_float_digits,options\n"
            f"logfile = {self.dir / 'pgbouncer.log'}\n"
        )
        if os.geteuid() == 0:
            shutil.chown(self.dir, _OS_USER, _OS_USER)
            for f in self.dir.iterdir():
                shutil.chown(f, _OS_USER, _OS_USER)
        self.proc: subprocess.Popen | None = None

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> PgBouncer:
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        prefix = ["runuser", "-u", _OS_USER, "--"] if os.geteuid() == 0 else []
        self.proc = subprocess.Popen([*prefix, binary, str(self.dir / "pgbouncer.ini")])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited {self.proc.returncode}: {self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"pgbouncer did not listen on {self.port}: {self.log()}")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self, tail: int | None = 2000) -> str:
        """The pooler's log: its last `tail` characters (for a message), or all of it."""
        path = self.dir / "pgbouncer.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return text if tail is None else text[-tail:]
