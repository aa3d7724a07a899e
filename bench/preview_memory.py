"""`python -m bench.preview_memory [--source DIR] [--repeat N]`: what a preview with
`records: 5000` over the largest inputs the API allows costs the gunicorn worker that
answers `POST /api/v1/pipelines/preview`, measured from outside (/proc). Not a test:
nothing asserts.

Each case gets a fresh one-worker gunicorn (`etl api`'s command, serving the code in
`--source`: default this tree; an exported older commit gives the "before" figures). Its
baseline is the worker's RSS after one small preview (idle), measured in the same run;
then `--repeat` previews of the case, one after the other in that worker. For each: the
worker's peak RSS during the request above its RSS just before it (VmHWM, started again
from the current RSS through /proc/PID/clear_refs), and its RSS once it has answered
above idle (what it keeps). Printed: median and range of both, the answer's size and the
time. Cases (30-step chains, each value 49.9 MiB unless said): one CSV field unquoted;
quoted over two lines; JSON Lines; a JSON array; a 30 MiB text of words through
`normalize_whitespace`; the quoted CSV field written by a CSV file export at the end; and
5,000 records of 1,000 columns."""

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
from drills import free_port
from drills.memory import child_pids, reset_peak, status_mib
from service.config import Config
from service.domain.principals import ADMIN, hash_token
from service.run.gunicorn import gunicorn_argv

ROOT = Path(__file__).resolve().parents[1]
PG = "postgresql://postgres@127.0.0.1:5432"
TOKEN = "bench-admin-token-0123456789"
STEPS = 30
CHARS = 50 * 2**20 - 100 * 1024  # 49.9 MiB


def chain(path: str, column: str, op: str = "trim", export: str | None = None) -> dict:
    """An ingest of `path` and `op` on `column` one step after the other (30 steps; the
    last a file export in `export`'s format when given)."""
    fmt = path.rsplit(".", 1)[1]
    steps = [{"name": "read", "type": "ingest",
              "config": {"source": "file", "path": path, "format": fmt}}]  # fmt: skip
    for i in range(STEPS - 1):
        steps.append(
            {"name": f"t{i}", "type": "transform", "depends_on": [steps[-1]["name"]],
             "config": {"op": op, "columns": [column]}}
        )  # fmt: skip
    if export:
        config = {"target": "file", "path": f"out.{export}", "format": export}
        steps[-1] = {"name": "out", "type": "export", "depends_on": [steps[-2]["name"]],
                     "config": config}  # fmt: skip
    return {"steps": steps}


def write_inputs(data: Path) -> dict[str, dict]:
    """The inputs and the plan of each case."""
    long = "x" * CHARS
    (data / "bare.csv").write_text(f"id,a,b\n1,{long},tail\n")
    (data / "quoted.csv").write_text(f'id,a,b\n1,"he said ""hi""\n{long[14:]}",tail\n')
    (data / "big.jsonl").write_text(json.dumps({"id": 1, "a": long, "b": "tail"}) + "\n")
    (data / "big.json").write_text(json.dumps([{"id": 1, "a": long, "b": "tail"}]))
    (data / "words.csv").write_text("id,a\n1," + "ab " * (30 * 2**20 // 3) + "\n")
    names = [f"c{i:04d}" for i in range(1000)]
    with open(data / "wide.csv", "w") as f:
        f.write(",".join(names) + "\n")
        row = ",".join(" value " for _ in names) + "\n"
        f.writelines(row for _ in range(5000))
    return {
        "(b) one 49.9 MiB CSV field, unquoted": chain("bare.csv", "a"),
        "(c) one 49.9 MiB CSV field, quoted over two lines": chain("quoted.csv", "a"),
        "(d) one 49.9 MiB JSON Lines value": chain("big.jsonl", "a"),
        "(e) one 49.9 MiB JSON array value": chain("big.json", "a"),
        "(f) a 30 MiB text of words, normalize_whitespace": chain(
            "words.csv", "a", "normalize_whitespace"
        ),
        "(g) (c) with a CSV file export at the end": chain("quoted.csv", "a", export="csv"),
        "(a) 5,000 records x 1,000 columns": chain("wide.csv", "c0000"),
    }


def post(base: str, plan: dict) -> tuple[int, bytes]:
    data = json.dumps({"plan": plan, "records": 5000}).encode()
    req = urllib.request.Request(
        f"{base}/api/v1/pipelines/preview", data=data, method="POST",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def one_case(source: Path, db_url: str, data: Path, plan: dict, repeat: int) -> list[tuple]:
    """In a fresh one-worker gunicorn: (idle RSS, peak above the RSS before, RSS after
    above idle, answer bytes, seconds, answer ok) of each of `repeat` previews."""
    port = free_port()
    cfg = Config(database_url=db_url, api_bind=f"127.0.0.1:{port}", api_workers=1)
    env = {**os.environ, "ETL_DATABASE_URL": db_url, "ETL_DATA_DIR": str(data),
           "ETL_EXPORT_DIR": str(data / "exports"), "ETL_LOG_LEVEL": "WARNING",
           "PYTHONPATH": str(source)}  # fmt: skip
    proc = subprocess.Popen(gunicorn_argv(cfg), env=env, cwd=source,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{base}/health", timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        (worker,) = child_pids(proc.pid)
        post(base, chain("small.csv", "a"))  # the worker's first preview: the baseline
        idle, _ = status_mib(worker)
        runs = []
        for _ in range(repeat):
            before, _ = status_mib(worker)
            reset_peak(worker)
            started = time.monotonic()
            status, answer = post(base, plan)
            took = time.monotonic() - started
            after, peak = status_mib(worker)
            ok = status == 200 and json.loads(answer)["ok"]
            if not ok:
                print(f"  {status}: {_failure(status, answer)}", flush=True)
            runs.append((idle, peak - before, after - idle, len(answer), took, ok))
        return runs
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def _failure(status: int, answer: bytes) -> str:
    """Why a preview did not preview every step: its first failed step's error."""
    if status != 200:
        return answer.decode(errors="replace")[:200]
    steps = json.loads(answer)["steps"]
    return next(f"{s['name']}: {s['error']}" for s in steps if s["status"] != "ok")


def _figure(values: list[float], unit: str, fmt: str = "{:.1f}") -> str:
    lo, mid, hi = min(values), statistics.median(values), max(values)
    return f"median {fmt.format(mid)} {unit} (range {fmt.format(lo)} to {fmt.format(hi)})"


def _report(label: str, runs: list[tuple]) -> None:
    idle, peak, kept, size, took, ok = (list(x) for x in zip(*runs, strict=True))
    print(f"{label}:  (previews ok: {sum(ok)} of {len(ok)})")
    print(f"  worker RSS idle (baseline)     {_figure(idle, 'MiB')}")
    print(f"  peak above the RSS before      {_figure(peak, 'MiB')}")
    print(f"  RSS after, above idle          {_figure(kept, 'MiB')}")
    print(f"  answer                         {_figure([s / 1e6 for s in size], 'MB', '{:.3f}')}")
    print(f"  time                           {_figure(took, 's', '{:.2f}')}", flush=True)


def _database() -> tuple[str, str]:
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
    return name, db_url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.preview_memory")
    parser.add_argument("--source", type=Path, default=ROOT, help="code tree to serve")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", help="run the cases whose label holds this text")
    args = parser.parse_args(argv)
    name, db_url = _database()
    data = Path(tempfile.mkdtemp(prefix="etl-bench-preview-"))
    try:
        cases = write_inputs(data)
        (data / "small.csv").write_text("id,a\n1,x\n")
        source = args.source.resolve()
        print(f"serving {source}; {args.repeat} previews per case in a fresh worker")
        for label, plan in cases.items():
            if args.only is None or args.only in label:
                _report(label, one_case(source, db_url, data, plan, args.repeat))
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
