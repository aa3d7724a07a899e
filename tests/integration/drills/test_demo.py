"""`make demo` run twice on one database (`python -m drills.demo`, as the Makefile runs it):
both runs belong to the one pipeline `demo`; the demo leaves no pile of pipelines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg2

from drills import free_port

ROOT = Path(__file__).resolve().parents[3]


def test_make_demo_twice_runs_the_one_pipeline_demo_twice(db_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETL_")}
    env.update(
        ETL_DATABASE_URL=db_url,
        ETL_API_BIND=f"127.0.0.1:{free_port()}",
        ETL_EXPORT_DIR=str(tmp_path / "exports"),
        ETL_REJECT_DIR=str(tmp_path / "rejects"),
        ETL_ADMIN_TOKEN="demo-test-admin-token-0001",
    )
    outputs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "drills.demo"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
        outputs.append(done.stdout)
    conn = psycopg2.connect(db_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT name, id::text FROM pipelines")
            pipelines = cur.fetchall()
            cur.execute("SELECT count(*), count(DISTINCT trigger_key) FROM runs")
            runs = cur.fetchone()
    finally:
        conn.close()
    ((name, pipeline_id),) = pipelines
    assert name == "demo" and runs == (2, 2)
    assert all(f"== pipeline demo ({pipeline_id}), revision 1" in out for out in outputs)
