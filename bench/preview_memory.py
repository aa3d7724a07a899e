"""`python -m bench.preview_memory [--source DIR] [--repeat N]`: the peak RSS (VmHWM) of the
gunicorn worker that answers `POST /api/v1/pipelines/preview` with `records: 5000` over the
largest inputs the API allows, and the size of its answer. Not a test: nothing asserts.

Each case runs in a fresh one-worker gunicorn serving the code in `--source` (default: this
tree; an exported older commit gives the "before" figures): the baseline is the worker's
VmHWM after `/health`, measured in the same run. Cases: (a) 5,000 records of 1,000 columns
through a 30-step chain; (b) one record with a 49.9 MiB field through a 30-step chain.
Printed: median and range over `--repeat` runs of the peak, the answer's bytes, the time."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import psycopg2

import ddl
from bench.list_memory import vm_hwm_mib, worker_pids
from drills import free_port
from service.domain.principals import ADMIN, hash_token

ROOT = Path(__file__).resolve().parents[1]
PG = "postgresql://postgres@127.0.0.1:5432"
TOKEN = "bench-admin-token-0123456789"
STEPS = 30


def chain_plan(path: str, column: str) -> dict:
    """An ingest of `path` and 29 trims of `column`, one after the other (30 steps)."""
    steps = [{"name": "read", "type": "ingest", "config": {"source": "file", "path": path}}]
    for i in range(STEPS - 1):
        steps.append(
            {"name": f"t{i}", "type": "transform", "depends_on": [steps[-1]["name"]],
             "config": {"op": "trim", "columns": [column]}}
        )  # fmt: skip
    return {"steps": steps}


def write_inputs(data: Path) -> dict[str, dict]:
    """The two inputs and their plans."""
    names = [f"c{i:04d}" for i in range(1000)]
    row = ",".join(" value " for _ in names)
    with open(data / "wide.csv", "w") as f:
        f.write(",".join(names) + "\n")
        for _ in range(5000):
            f.write(row + "\n")
    with open(data / "big.csv", "w") as f:
        f.write("id,a\n1," + "x" * (50 * 2**20 - 200 * 1024) + "\n")
    return {
        "(a) 5,000 x 1,000 columns, 30 steps": chain_plan("wide.csv", "c0000"),
        "(b) one 49.9 MiB field, 30 steps": chain_plan("big.csv", "a"),
    }


def post(base: str, body: dict) -> tuple[int, int, float]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        f"{base}/api/v1/pipelines/preview", data=data, method="POST",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )  # fmt: skip
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            status, answer = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, answer = exc.code, exc.read()
    return status, len(answer), time.monotonic() - started


def one_case(source: Path, db_url: str, data: Path, plan: dict) -> tuple[float, float, int, float]:
    """(idle VmHWM, VmHWM after the preview, answer bytes, seconds) in a fresh worker."""
    port = free_port()
    exe = Path(sys.executable).with_name("gunicorn")
    argv = [str(exe), "--workers", "1", "--worker-class", "gthread", "--threads", "4",
            "--bind", f"127.0.0.1:{port}", "--timeout", "600", "service.app:get_app()"]  # fmt: skip
    env = {**os.environ, "ETL_DATABASE_URL": db_url, "ETL_DATA_DIR": str(data),
           "ETL_EXPORT_DIR": str(data / "exports"), "ETL_LOG_LEVEL": "WARNING",
           "PYTHONPATH": str(source)}  # fmt: skip
    proc = subprocess.Popen(argv, env=env, cwd=source, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{base}/health", timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        (worker,) = worker_pids(proc.pid)
        idle = vm_hwm_mib(worker)
        _, size, took = post(base, {"plan": plan, "records": 5000})
        return idle, vm_hwm_mib(worker), size, took
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def _figure(values: list[float], unit: str, fmt: str = "{:.1f}") -> str:
    lo, mid, hi = min(values), statistics.median(values), max(values)
    return f"median {fmt.format(mid)} {unit} (range {fmt.format(lo)}-{fmt.format(hi)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.preview_memory")
    parser.add_argument("--source", type=Path, default=ROOT, help="code tree to serve")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    name = f"etl_bench_previewmem_{os.getpid()}"
    db_url = f"{PG}/{name}"
    ddl.migrate(db_url)
    conn = psycopg2.connect(db_url)
    with conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO principals (id, name, role, token_hash) VALUES (%s, %s, %s, %s)",
            (str(uuid.uuid4()), "bench-admin", ADMIN, hash_token(TOKEN)),
        )
    conn.close()
    data = Path(tempfile.mkdtemp(prefix="etl-bench-preview-"))
    try:
        cases = write_inputs(data)
        print(f"serving {args.source.resolve()}; {args.repeat} runs per case, a fresh worker each")
        for label, plan in cases.items():
            runs = [one_case(args.source.resolve(), db_url, data, plan) for _ in range(args.repeat)]
            idle, peak, size, took = (list(x) for x in zip(*runs, strict=True))
            print(f"{label}:")
            print(f"  worker VmHWM idle (baseline)   {_figure(idle, 'MiB')}")
            print(f"  worker VmHWM after the preview {_figure(peak, 'MiB')}")
            answer = _figure([s / 1e6 for s in size], "MB", "{:.2f}")
            print(f"  answer                         {answer}")
            print(f"  time                           {_figure(took, 's', '{:.2f}')}")
    finally:
        shutil.rmtree(data, ignore_errors=True)
        admin = psycopg2.connect(f"{PG}/postgres")
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
