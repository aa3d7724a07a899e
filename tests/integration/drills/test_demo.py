"""`make demo` (`python -m drills.demo`, as the Makefile runs it) as a process of its own on
a database of its own: it runs the sample pipeline, leaves no credential behind that anyone
else could know, and run twice on one database both runs belong to the one pipeline `demo`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg2

from drills.harness import ROOT, free_port
from service.domain.db import Database
from service.domain.principals import ADMIN, find_principal

KNOWN = "demo-admin-token-change-me"  # what the demo seeded as the admin's token


def test_the_demo_leaves_no_known_credential(db_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETL_")}
    env.update({
        "ETL_DATABASE_URL": db_url, "ETL_SANDBOX_URL": db_url,
        "ETL_API_BIND": f"127.0.0.1:{free_port()}",
        "ETL_EXPORT_DIR": str(tmp_path / "exports"), "ETL_REJECT_DIR": str(tmp_path / "rejects"),
    })  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "drills.demo"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "status=succeeded" in done.stdout
    shown = re.search(r"sign in with the token (\S+?)\)", done.stdout)
    assert shown is not None, done.stdout[-2000:]
    db = Database(db_url, max_connections=1, application_name="etl-test")
    try:
        assert shown[1] != KNOWN and find_principal(db, shown[1]) is None
        assert find_principal(db, KNOWN) is None
        with db.transaction() as cur:
            cur.execute("SELECT name FROM principals WHERE revoked_at IS NULL")
            assert [r["name"] for r in cur.fetchall()] == [ADMIN]  # the platform's own admin
    finally:
        db.close()


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
