"""A real local topology for engine tests: `etl up` (coordinator with gunicorn + two executor
processes) on a test's own database and directories, driven over HTTP and SQL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psycopg2

ADMIN_TOKEN = "test-admin-token-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]
TERMINAL = ("succeeded", "failed", "canceled")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    """Start/stop `etl up` (or single processes) against `db_url`, with fast lease timings."""

    def __init__(self, db_url: str, tmp: Path, *, env: dict[str, str] | None = None):
        self.db_url = db_url
        self.tmp = tmp
        self.data = tmp / "data"
        self.exports = tmp / "exports"
        self.rejects = tmp / "rejects"
        for d in (self.data, self.exports, self.rejects):
            d.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.env = {
            **os.environ,
            "ETL_DATABASE_URL": db_url,
            "ETL_SANDBOX_URL": db_url,
            "ETL_DATA_DIR": str(self.data),
            "ETL_EXPORT_DIR": str(self.exports),
            "ETL_REJECT_DIR": str(self.rejects),
            "ETL_API_BIND": f"127.0.0.1:{self.port}",
            "ETL_ADMIN_TOKEN": ADMIN_TOKEN,
            "ETL_LEASE_TTL_S": "3",
            "ETL_HEARTBEAT_S": "1",
            "ETL_SWEEP_S": "0.5",
            "ETL_API_WORKERS": "2",
            **(env or {}),
        }
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    # --- processes ---
    def etl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "service", *args],
            env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip

    def spawn(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start `etl ARGS` as process `name` (its output goes to tmp/<name>.log)."""
        log = self.tmp / f"{name}.log"
        self.logs[name] = log
        with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(
                [sys.executable, "-m", "service", *args],
                env={**self.env, **(env or {})}, cwd=ROOT,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.procs[name] = proc
        return proc

    def start(self, *, executors: tuple[str, ...] = ("executor-1", "executor-2")) -> Stack:
        self.etl("seed")
        self.spawn("coordinator", "coordinator")
        for name in executors:
            self.spawn(name, "executor", "--name", name)
        self.wait_healthy()
        return self

    def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if self.req("GET", "/health", auth=False)[0] == 200:
                    return
            except OSError:
                pass
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited: {self.logs[name].read_text()[-3000:]}")
            time.sleep(0.2)
        raise RuntimeError("API not healthy: " + self.logs["coordinator"].read_text()[-3000:])

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        os.killpg(self.procs[name].pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.procs[name].wait(30)

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGCONT)
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs.values():
            try:
                p.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)

    def log_text(self) -> str:
        return "\n".join(f"--- {n}\n{p.read_text()[-4000:]}" for n, p in self.logs.items())

    # --- HTTP ---
    def req(self, method: str, path: str, body=None, *, auth: bool = True):
        prefix = "" if path.startswith("/health") else "/api/v1"
        url = f"http://127.0.0.1:{self.port}{prefix}{path}"
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if auth:
            headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                text = resp.read().decode()
                return resp.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            return e.code, json.loads(text) if text else None

    def create(self, name: str, plan: dict) -> str:
        code, body = self.req("POST", "/pipelines", {"name": name, "plan": plan})
        assert code == 201, body
        return body["id"]

    def trigger(self, pipeline_id: str, key: str | None = None) -> tuple[int, dict]:
        body = {"trigger_key": key} if key else {}
        return self.req("POST", f"/pipelines/{pipeline_id}/runs", body)

    def run(self, run_id: str) -> dict:
        code, body = self.req("GET", f"/runs/{run_id}")
        assert code == 200, body
        return body

    def wait_run(self, run_id: str, timeout: float = 120, until=TERMINAL) -> dict:
        deadline = time.time() + timeout
        run: dict = {}
        while time.time() < deadline:
            run = self.run(run_id)
            if run["status"] in until:
                return run
            time.sleep(0.2)
        raise TimeoutError(f"run {run_id} not {until}: {json.dumps(run)[:2000]}\n{self.log_text()}")

    def wait_for(self, predicate, timeout: float = 60, what: str = "condition"):
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"{what} not reached in {timeout} s\n{self.log_text()}")

    # --- SQL ---
    def sql(self, query: str, *args):
        conn = psycopg2.connect(self.db_url)
        try:
            with conn.cursor() as cur:
                cur.execute(query, args or None)
                rows = cur.fetchall() if cur.description else []
            conn.commit()
            return rows
        finally:
            conn.close()
