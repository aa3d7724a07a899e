"""`make demo`: migrate, seed, start the local topology (`etl up`), run the sample pipeline
(`fixtures/plans/demo.json`) on `fixtures/`, print the run with its steps and outputs, stop.

Run with the project's virtualenv: `python -m service.demo`. The configuration comes from
the usual `ETL_*` variables; `ETL_ADMIN_TOKEN` defaults to a demo token here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import psycopg2

from service.config import Config

ROOT = Path(__file__).resolve().parents[1]
DEMO_TOKEN = "demo-admin-token-change-me"


class Client:
    """A tiny JSON client of our REST API."""

    def __init__(self, bind: str, token: str):
        self.base = f"http://{bind}"
        self.token = token

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        url = self.base + ("" if path == "/health" else "/api/v1") + path
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")


def _etl(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "service", *args], env=env, cwd=ROOT, check=True)


def _wait_healthy(client: Client, up: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if up.poll() is not None:
            raise SystemExit(f"etl up exited with {up.returncode}")
        try:
            if client.call("GET", "/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit("the API did not become healthy in time")


def _print_run(run: dict, cfg: Config) -> None:
    print(f"\nrun {run['id']}  status={run['status']}  trace_id={run['trace_id']}")
    print(
        f"  revision {run['revision']}, started {run['started_at']}, finished {run['finished_at']}"
    )
    print(f"\n  {'step':<28}{'status':<11}{'in':>6}{'out':>6}{'rej':>5}  attempts  output_digest")
    for s in run["steps"]:
        attempts = ",".join(
            f"{a['number']}:{(a['executor'] or '-').split(':')[0]}" for a in s["attempts"]
        )
        print(
            f"  {s['name']:<28}{s['status']:<11}{s['records_in']:>6}{s['records_out']:>6}"
            f"{s['rejected']:>5}  {attempts:<9} {(s['output_digest'] or '')[:16]}"
        )
    print("\n  column types:")
    for s in run["steps"]:
        print(f"    {s['name']}: {json.dumps(s['columns'])}")
    print("\n  outputs:")
    for path in sorted((cfg.export_dir / run["id"]).rglob("*")):
        if path.is_file():
            lines = path.read_text().splitlines()
            print(f"    {path}  ({len(lines)} lines), first: {lines[0][:100] if lines else ''}")
    for path in sorted((cfg.reject_dir / run["id"]).rglob("*.jsonl")):
        lines = path.read_text().splitlines()
        print(f"    {path}  ({len(lines)} rejected rows), first: {lines[0][:140] if lines else ''}")
    with psycopg2.connect(cfg.sandbox_url) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM sandbox.demo_active_customers WHERE run_id = %s", (run["id"],)
        )
        print(f"    sandbox.demo_active_customers  ({cur.fetchone()[0]} rows of this run)")


def main() -> int:
    env = dict(os.environ)
    env.setdefault("ETL_ADMIN_TOKEN", DEMO_TOKEN)
    cfg = Config.from_env(env)
    print("== migrate, seed")
    _etl("migrate", env=env)
    _etl("seed", env=env)
    log_path = ROOT / "var" / "demo" / "up.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    print(f"== etl up (coordinator + executor-1 + executor-2), log: {log_path}")
    with open(log_path, "ab") as log:
        up = subprocess.Popen(
            [sys.executable, "-m", "service", "up"], env=env, cwd=ROOT, stdout=log, stderr=log
        )
    client = Client(cfg.api_bind, env["ETL_ADMIN_TOKEN"])
    try:
        _wait_healthy(client, up)
        doc = json.loads((ROOT / "fixtures" / "plans" / "demo.json").read_text())
        name = f"{doc['name']}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
        code, pipeline = client.call("POST", "/pipelines", {"name": name, "plan": doc["plan"]})
        if code != 201:
            raise SystemExit(f"create pipeline: {code} {pipeline}")
        print(f"== pipeline {name} ({pipeline['id']}), revision {pipeline['revision']}")
        code, run = client.call(
            "POST", f"/pipelines/{pipeline['id']}/runs", {"trigger_key": "demo"}
        )
        print(f"== triggered: HTTP {code}, run {run['id']} {run['status']}")
        deadline = time.monotonic() + 120
        while run["status"] not in ("succeeded", "failed", "canceled"):
            if time.monotonic() > deadline:
                raise SystemExit(f"run not finished in time: {run}")
            time.sleep(0.3)
            run = client.call("GET", f"/runs/{run['id']}")[1]
        _print_run(run, cfg)
        return 0 if run["status"] == "succeeded" else 1
    finally:
        print("\n== stopping etl up")
        up.send_signal(signal.SIGTERM)
        up.wait(60)


if __name__ == "__main__":
    raise SystemExit(main())
