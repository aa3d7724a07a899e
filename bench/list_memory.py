"""`python -m bench.list_memory [--source DIR]`: the peak RSS (VmHWM) of the gunicorn worker
that answers `GET /api/v1/pipelines` when 60 pipelines have large (~1 MB) plans.

It builds a fresh database (migrations, a viewer token, `--plans` pipelines whose plan is a
valid `map` transform of about `--plan-kib` KiB), serves the API from the code in `--source`
(default: this tree; point it at an exported older commit to get the "before" figure) with
one worker, and prints the worker's VmHWM after `/health`, after `GET /pipelines` and after
`GET /pipelines?limit=500`, with the answer's size and shape. Not a test: nothing asserts."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import psycopg2
import psycopg2.extras

import ddl
from dag.plan import validate_plan
from drills.memory import child_pids
from service.config import Config
from service.domain.principals import VIEWER, hash_token
from service.run.gunicorn import gunicorn_argv

ROOT = Path(__file__).resolve().parents[1]
PG = "postgresql://postgres@127.0.0.1:5432"
TOKEN = "bench-viewer-token-0123456789"


def large_plan(kib: int) -> dict:
    """A valid three-step plan whose `map` mapping makes it about `kib` KiB of JSON."""
    entries = kib * 1024 // 46
    mapping = {f"k{i:07d}": f"value-{i:07d}-{'x' * 14}" for i in range(entries)}
    plan = {
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "customers.csv", "format": "csv"}},
            {"name": "map", "type": "transform", "depends_on": ["read"],
             "config": {"op": "map", "column": "city", "mapping": mapping}},
            {"name": "out", "type": "export", "depends_on": ["map"],
             "config": {"target": "file", "path": "out.jsonl", "format": "jsonl"}},
        ]
    }  # fmt: skip
    errors = validate_plan(plan)
    if errors:
        raise SystemExit(f"the generated plan is invalid: {errors}")
    return plan


def seed(db_url: str, plans: int, kib: int) -> int:
    """Principal + `plans` pipelines; returns the plan size in bytes."""
    plan = large_plan(kib)
    conn = psycopg2.connect(db_url)
    with conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO principals (id, name, role, token_hash) VALUES (%s, %s, %s, %s)",
            (str(uuid.uuid4()), "bench-viewer", VIEWER, hash_token(TOKEN)),
        )
        for i in range(plans):
            pid = str(uuid.uuid4())
            cur.execute(
                "INSERT INTO pipelines (id, name, revision) VALUES (%s, %s, 1)", (pid, f"big-{i}")
            )
            cur.execute(
                "INSERT INTO revisions (pipeline_id, number, plan, created_by)"
                " VALUES (%s, 1, %s, 'bench')",
                (pid, psycopg2.extras.Json(plan)),
            )
    conn.close()
    return len(json.dumps(plan))


def vm_hwm_mib(pid: int) -> float:
    """Peak resident set size of `pid` in MiB (VmHWM in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for {pid}")


def get(base: str, path: str, auth: bool = True) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {TOKEN}"} if auth else {}
    req = urllib.request.Request(f"{base}{path}", headers=headers)
    with urllib.request.urlopen(req, timeout=600) as resp:
        return resp.status, resp.read()


def shape(body: bytes) -> str:
    data = json.loads(body)
    if isinstance(data, list):
        return f"a bare list of {len(data)} full pipelines (with plans)"
    return (
        f'{{"items": {len(data["items"])} summaries, "next": {"set" if data["next"] else "null"}}}'
    )


def measure(source: Path, plans: int, kib: int, port: int) -> None:
    name = f"etl_bench_listmem_{os.getpid()}"
    admin = psycopg2.connect(f"{PG}/postgres")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}"')
    db_url = f"{PG}/{name}"
    ddl.migrate(db_url)
    size = seed(db_url, plans, kib)
    print(f"{plans} pipelines, plan of {size / 1024:.0f} KiB each; serving {source}")
    cfg = Config(database_url=db_url, api_bind=f"127.0.0.1:{port}", api_workers=1)
    env = {**os.environ, "ETL_DATABASE_URL": db_url, "ETL_LOG_LEVEL": "WARNING",
           "PYTHONPATH": str(source)}  # fmt: skip
    proc = subprocess.Popen(
        gunicorn_argv(cfg), env=env, cwd=source, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if get(base, "/health", auth=False)[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        (worker,) = child_pids(proc.pid)
        print(f"worker VmHWM after /health:                 {vm_hwm_mib(worker):8.1f} MiB")
        for path in ("/api/v1/pipelines", "/api/v1/pipelines?limit=500"):
            started = time.monotonic()
            status, body = get(base, path)
            took = time.monotonic() - started
            print(
                f"worker VmHWM after GET {path:<28} {vm_hwm_mib(worker):8.1f} MiB"
                f"  ({status}, {len(body) / 1024:.0f} KiB, {took:.2f} s: {shape(body)})"
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.list_memory")
    parser.add_argument("--source", type=Path, default=ROOT, help="code tree to serve")
    parser.add_argument("--plans", type=int, default=60)
    parser.add_argument(
        "--plan-kib", type=int, default=1000, help="plan size (the API takes bodies up to 1 MiB)"
    )
    parser.add_argument("--port", type=int, default=18765)
    args = parser.parse_args(argv)
    measure(args.source.resolve(), args.plans, args.plan_kib, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
