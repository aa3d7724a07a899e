"""`make demo`: migrate, seed, start the local topology (`etl up`), run the sample pipeline
(`fixtures/plans/demo.json`) on `fixtures/`, print the run with its steps and outputs and the
web console's address and a sign-in token of this demo alone, stop (on a terminal: once Enter
is pressed) and revoke that token.

Run with the project's virtualenv: `python -m drills.demo`. The configuration comes from
the usual `ETL_*` variables; `etl seed` keeps the admin of `ETL_ADMIN_TOKEN` (or, without it,
an existing admin; a new one's generated token is printed once)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime

from dag import RUN_TERMINAL, RunStatus
from ddl import connect
from drills.harness import ROOT, ApiClient
from service.config import Config
from service.domain.db import Database
from service.domain.principals import ADMIN
from service.domain.tokens import IssuedToken, create_token, revoke_token

# The console sign-in token: random, made for one demo and revoked when it stops (it expires
# by itself should the demo be killed first). The platform's admin is never touched.
DEMO_TOKEN_TTL_S = 3600
DEMO_PRINCIPAL = "etl demo"  # who the audit names for the demo's token


def _etl(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "service", *args], env=env, cwd=ROOT, check=True)


def _demo_pipeline(client: ApiClient, doc: dict) -> dict:
    """The pipeline `demo`: created on the first `make demo`, the same one afterwards (a
    new revision only when fixtures/plans/demo.json changed), so runs add up on it."""
    _, page = client.call("GET", f"/pipelines?name={doc['name']}")
    if not page["items"]:
        code, pipeline = client.call("POST", "/pipelines", doc)
    else:
        code, pipeline = client.call("GET", f"/pipelines/{page['items'][0]['id']}")
        if pipeline["plan"] != doc["plan"]:
            path = f"/pipelines/{pipeline['id']}"
            code, pipeline = client.call("PATCH", path, {"plan": doc["plan"]})
    if code not in (200, 201):
        raise SystemExit(f"pipeline {doc['name']}: {code} {pipeline}")
    return pipeline


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
    with connect(cfg.sandbox_url, "etl-demo") as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM sandbox.demo_active_customers WHERE run_id = %s", (run["id"],)
        )
        print(f"    sandbox.demo_active_customers  ({cur.fetchone()[0]} rows of this run)")


def _show_console(cfg: Config, token: str, run_id: str) -> None:
    """Where to look at the run in the web console; on a terminal, keep the topology up
    until Enter (or Ctrl-C) so the pages can be opened."""
    base = f"http://{cfg.api_bind}/ui"
    print(f"\n== web console: {base}/  (sign in with the token {token})")
    print("   (this demo's own token: revoked when the demo stops)")
    print(f"   this run's page: {base}/runs/{run_id}")
    if sys.stdin.isatty():
        try:
            input("   press Enter to stop everything ")
        except (EOFError, KeyboardInterrupt):
            pass


def main() -> int:
    env = dict(os.environ)
    cfg = Config.from_env(env)
    print("== migrate, seed")
    _etl("migrate", env=env)
    _etl("seed", env=env)  # the admin of ETL_ADMIN_TOKEN, or a generated one if none exists
    demo = _issue_demo_token(cfg)
    try:
        return _run_demo(cfg, env, demo.token)
    finally:
        _revoke_demo_token(cfg, demo)


def _issue_demo_token(cfg: Config) -> IssuedToken:
    """A random admin token of this demo alone, expiring in `DEMO_TOKEN_TTL_S`."""
    db = Database(cfg.database_url, max_connections=1, application_name="etl-demo")
    try:
        with db.transaction() as cur:
            name = f"demo-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
            return create_token(
                cur, str(uuid.uuid4()), name, ADMIN, DEMO_TOKEN_TTL_S, DEMO_PRINCIPAL,
                request_id=None,
            )  # fmt: skip
    finally:
        db.close()


def _revoke_demo_token(cfg: Config, demo: IssuedToken) -> None:
    db = Database(cfg.database_url, max_connections=1, application_name="etl-demo")
    try:
        with db.transaction() as cur:
            revoke_token(cur, str(demo.record["id"]), DEMO_PRINCIPAL, request_id=None)
    finally:
        db.close()
    print(f"== the demo's token {demo.record['name']} is revoked")


def _run_demo(cfg: Config, env: dict[str, str], token: str) -> int:
    log_path = ROOT / "var" / "demo" / "up.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    print(f"== etl up (coordinator + executor-1 + executor-2), log: {log_path}")
    with open(log_path, "ab") as log:
        up = subprocess.Popen(
            [sys.executable, "-m", "service", "up"], env=env, cwd=ROOT, stdout=log, stderr=log
        )
    client = ApiClient(f"http://{cfg.api_bind}", token, timeout_s=30)

    def alive() -> None:
        if up.poll() is not None:
            raise SystemExit(f"etl up exited with {up.returncode}")

    try:
        client.wait_healthy(timeout=60, alive=alive)
        doc = json.loads((ROOT / "fixtures" / "plans" / "demo.json").read_text())
        name, pipeline = doc["name"], _demo_pipeline(client, doc)
        print(f"== pipeline {name} ({pipeline['id']}), revision {pipeline['revision']}")
        key = f"demo-{datetime.now(UTC):%Y%m%d-%H%M%S-%f}"  # each `make demo` runs anew
        code, run = client.call("POST", f"/pipelines/{pipeline['id']}/runs", {"trigger_key": key})
        print(f"== triggered: HTTP {code}, run {run['id']} {run['status']}")
        deadline = time.monotonic() + 120
        while run["status"] not in RUN_TERMINAL:
            if time.monotonic() > deadline:
                raise SystemExit(f"run not finished in time: {run}")
            time.sleep(0.3)
            run = client.call("GET", f"/runs/{run['id']}")[1]
        _print_run(run, cfg)
        _show_console(cfg, token, run["id"])
        return 0 if run["status"] == RunStatus.SUCCEEDED else 1
    finally:
        print("\n== stopping etl up")
        up.send_signal(signal.SIGTERM)
        up.wait(60)


if __name__ == "__main__":
    raise SystemExit(main())
