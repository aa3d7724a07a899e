"""The local topology and the means to drive it, shared by the drills, the demo, the
benchmarks and the integration tests: a free port, a JSON client of the REST API with a
wait for health, SQL on the topology's database, a barrier to release calls together, and
`Stack`, the real processes (`etl coordinator` + executors, or `etl up`) on one database
with their own data, export and reject directories."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dag import RUN_FINAL
from ddl import connect

ROOT = Path(__file__).resolve().parents[1]
ADMIN_TOKEN = "harness-admin-token-0123456789abcdef"
# Lease 3 s, heartbeat 1 s, sweep 0.5 s: tests and `--fast` drills see takeovers quickly.
FAST_TIMINGS = {"ETL_LEASE_TTL_S": "3", "ETL_HEARTBEAT_S": "1", "ETL_SWEEP_S": "0.5"}


def now_utc() -> datetime:
    return datetime.now(UTC)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(
    predicate: Callable[[], Any],
    *,
    timeout: float,
    what: str,
    every: float = 0.05,
    context: Callable[[], str] = lambda: "",
) -> Any:
    """Poll `predicate` until it returns something truthy (returned); TimeoutError naming
    `what` (and `context()`, e.g. a log tail) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(every)
    raise TimeoutError(f"{what}: not reached in {timeout:g} s\n{context()}")


def run_sql(url: str, query: str, *args: Any, app: str = "etl-harness") -> list[tuple]:
    """Run one statement on `url` in its own transaction; its rows (none for DML)."""
    conn = connect(url, app)
    try:
        with conn.cursor() as cur:
            cur.execute(query, args or None)
            rows = cur.fetchall() if cur.description else []
        conn.commit()
        return rows
    finally:
        conn.close()


def drop_database(server_url: str, name: str) -> None:
    """Drop database `name` (ours: a drill's or a test's) and its sessions, if it exists."""
    conn = connect(f"{server_url}/postgres", "etl-harness")
    conn.autocommit = True
    try:
        conn.cursor().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        conn.close()


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


class ApiClient:
    """A JSON client of the REST API at `base` (`http://host:port`). Paths under
    `/api/v1` may be given without the prefix; `/health`, `/metrics` and `/ui` as they are."""

    def __init__(self, base: str, token: str | None = ADMIN_TOKEN, *, timeout_s: float = 60):
        self.base = base.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def url(self, path: str) -> str:
        bare = path.startswith(("/health", "/metrics", "/ui", "/api/"))
        return self.base + ("" if bare else "/api/v1") + path

    def call(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> tuple:
        """(HTTP status, decoded JSON body or None). An answer cut off midway (a server
        killed while answering) raises `ConnectionError`, as a refused connection does."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url(path), data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:
                text = resp.read()
                return resp.status, json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            text = exc.read()
            return exc.code, json.loads(text) if text else None
        except http.client.HTTPException as exc:  # an answer cut off (a server going down)
            raise ConnectionError(f"{method} {path}: the answer broke off: {exc!r}") from exc

    def healthy(self) -> bool:
        try:
            return self.call("GET", "/health", auth=False)[0] == 200
        except OSError:
            return False

    def wait_healthy(self, *, timeout: float = 90, alive: Callable[[], None] = lambda: None):
        """Wait for /health to answer 200; `alive()` raises when the server died meanwhile."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.healthy():
                return
            alive()
            time.sleep(0.2)
        raise RuntimeError(f"the API at {self.base} did not become healthy in {timeout:g} s")

    def create(self, name: str, plan: dict) -> str:
        """Create pipeline `name`; its id."""
        code, body = self.call("POST", "/pipelines", {"name": name, "plan": plan})
        if code != 201:
            raise RuntimeError(f"creating pipeline {name}: {code} {body}")
        return body["id"]

    def trigger(self, pipeline_id: str, key: str | None = None) -> tuple[int, dict]:
        return self.call(
            "POST", f"/pipelines/{pipeline_id}/runs", {"trigger_key": key} if key else {}
        )

    def run(self, run_id: str) -> dict:
        code, body = self.call("GET", f"/runs/{run_id}")
        if code != 200:
            raise RuntimeError(f"GET /runs/{run_id}: {code} {body}")
        return body


class Stack:
    """Real processes on database `db_url` with data/export/reject directories under
    `directory`, driven over HTTP (`api`) and SQL. `start()` seeds and starts a coordinator
    and executors (or `etl up` with `up=True`) and waits for /health; `stop()` stops them.
    Each process runs in its own session, so a kill reaches its children too."""

    def __init__(
        self,
        db_url: str,
        directory: Path,
        *,
        fast: bool = True,
        env: dict[str, str] | None = None,
        token: str = ADMIN_TOKEN,
    ):
        self.db_url = db_url
        # the URL's parameters (`?target_session_attrs=...`) follow the database name
        self.server_url, self.db_name = db_url.partition("?")[0].rsplit("/", 1)
        self.dir = directory
        self.data, self.exports, self.rejects = (
            directory / d for d in ("data", "exports", "rejects")
        )
        for d in (self.data, self.exports, self.rejects):
            d.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.topology_env = {
            "ETL_DATABASE_URL": db_url,
            "ETL_SANDBOX_URL": db_url,
            "ETL_DATA_DIR": str(self.data),
            "ETL_EXPORT_DIR": str(self.exports),
            "ETL_REJECT_DIR": str(self.rejects),
            "ETL_API_BIND": f"127.0.0.1:{self.port}",
            "ETL_ADMIN_TOKEN": token,
            "ETL_TOKEN": token,  # `etl` client commands (`stack.etl("token", ...)`) as the admin
            **(FAST_TIMINGS if fast else {}),
            **(env or {}),
        }
        self.env = {**os.environ, **self.topology_env}
        self.api = ApiClient(f"http://127.0.0.1:{self.port}", token)
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    # --- processes ---
    def etl(self, *args: str, timeout: float = 120) -> str:
        """Run `etl ARGS` to completion in the topology's environment; its stdout."""
        done = subprocess.run(
            [sys.executable, "-m", "service", *args],
            env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"etl {' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def spawn(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start `etl ARGS` as process `name` in its own session (output: DIR/<name>.log)."""
        log = self.dir / f"{name}.log"
        self.logs[name] = log
        with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(
                [sys.executable, "-m", "service", *args],
                env={**self.env, **(env or {})}, cwd=ROOT,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.procs[name] = proc
        return proc

    def start(self, *, executors: Iterable[str] = ("executor-1", "executor-2"), up: bool = False):
        """Seed, start the processes and wait for /health; returns self."""
        self.etl("seed")
        if up:
            self.spawn("up", "up")
        else:
            self.spawn("coordinator", "coordinator")
            for name in executors:
                self.spawn(name, "executor", "--name", name)
        self.wait_healthy()
        return self

    def wait_healthy(self, timeout: float = 90) -> None:
        def alive() -> None:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}: {self.log_text()}")

        self.api.wait_healthy(timeout=timeout, alive=alive)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to the process group of process `name` (and reap it when it ends)."""
        os.killpg(self.procs[name].pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.procs[name].wait(30)

    def stop(self) -> None:
        """SIGTERM every process group (SIGCONT first: a stopped one must see it), then
        SIGKILL what is left."""
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGCONT)
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.procs.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # leftovers (e.g. an orphaned child)
            except ProcessLookupError:
                pass

    def log_text(self, chars: int = 4000) -> str:
        return "\n".join(
            f"--- {n}\n{p.read_text(errors='replace')[-chars:]}"
            for n, p in self.logs.items()
            if p.exists()
        )

    # --- the API and the database ---
    def req(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> tuple:
        return self.api.call(method, path, body, auth=auth)

    call = req

    def create(self, name: str, plan: dict) -> str:
        return self.api.create(name, plan)

    def trigger(self, pipeline_id: str, key: str | None = None) -> tuple[int, dict]:
        return self.api.trigger(pipeline_id, key)

    def run(self, run_id: str) -> dict:
        return self.api.run(run_id)

    def wait_for(
        self,
        predicate: Callable[[], Any],
        timeout: float = 60,
        what: str = "condition",
        every: float = 0.1,
    ) -> Any:
        return wait_until(predicate, timeout=timeout, what=what, every=every, context=self.log_text)

    def wait_run(self, run_id: str, timeout: float = 300, until: Iterable[str] = RUN_FINAL) -> dict:
        """The run once its status is in `until` (a restarting API is asked again)."""
        wanted = tuple(until)

        def reached() -> dict | None:
            try:
                run = self.run(run_id)
            except OSError:
                return None
            return run if run["status"] in wanted else None

        return self.wait_for(reached, timeout=timeout, what=f"run {run_id} {wanted}")

    def sql(self, query: str, *args: Any) -> list[tuple]:
        return run_sql(self.db_url, query, *args)
