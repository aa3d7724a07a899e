"""`etl run PIPELINE --wait` and `etl runs watch` against the real topology (`etl up`: the
coordinator and two executors): live progress, and an exit status that says how the run
ended (0 only for succeeded)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from drills import ADMIN_TOKEN, ROOT, Stack

DEMO = ROOT / "fixtures" / "plans" / "demo.json"


def client_env(demo_stack: Stack) -> dict[str, str]:
    return {**demo_stack.env, "ETL_TOKEN": ADMIN_TOKEN}


def etl(demo_stack: Stack, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        env=client_env(demo_stack), cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def test_run_demo_wait_exits_0_on_success_and_1_on_failure(
    demo_stack: Stack, tmp_path: Path
) -> None:
    applied = etl(demo_stack, "pipelines", "apply", str(DEMO))
    assert applied.returncode == 0, applied.stderr
    done = etl(demo_stack, "run", "demo", "--wait")
    assert done.returncode == 0, (done.stdout, done.stderr, demo_stack.log_text())
    lines = done.stdout.splitlines()
    run_id = lines[0].split()[2]
    assert lines[-1].startswith(f"run {run_id} succeeded in ")
    steps = [s["name"] for s in json.loads(DEMO.read_text())["plan"]["steps"]]
    finals = {}
    for ln in lines:
        if ln.split() and ln.split()[0] in steps:
            finals[ln.split()[0]] = ln
    assert set(finals) == set(steps)
    assert all(" succeeded " in ln and "attempts 1" in ln for ln in finals.values())
    assert all("executor executor-" in ln for ln in finals.values())
    (step,) = [s for s in demo_stack.run(run_id)["steps"] if s["name"] == "read"]
    assert f"{step['records_in']}/{step['records_in']}" in finals["read"].split()

    broken = json.loads(DEMO.read_text())
    broken["name"] = "broken"
    broken["plan"]["steps"][0]["config"]["path"] = "missing.csv"
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    assert etl(demo_stack, "pipelines", "apply", str(tmp_path / "broken.json")).returncode == 0
    failed = etl(demo_stack, "run", "broken", "--wait")
    assert failed.returncode == 1, (failed.stdout, failed.stderr)
    failed_id = failed.stdout.splitlines()[0].split()[2]
    assert failed.stdout.splitlines()[-1].startswith(f"run {failed_id} failed")
    assert any(ln.startswith("read ") and " failed " in ln for ln in failed.stdout.splitlines())

    assert etl(demo_stack, "runs", "watch", run_id).returncode == 0
    assert etl(demo_stack, "runs", "watch", failed_id).returncode == 1
    waited = etl(demo_stack, "run", "demo", "--key", "again", "--wait", "--json")
    assert waited.returncode == 0 and json.loads(waited.stdout)["status"] == "succeeded"


def test_watch_on_a_terminal_draws_a_live_table(demo_stack: Stack) -> None:
    assert etl(demo_stack, "pipelines", "apply", str(DEMO)).returncode == 0
    run_id = json.loads(etl(demo_stack, "run", "demo", "--json").stdout)["id"]
    controller, terminal = pty.openpty()
    env = {**client_env(demo_stack), "TERM": "xterm-256color", "COLUMNS": "160"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "runs", "watch", run_id],
        env=env, cwd=ROOT, stdin=terminal, stdout=terminal, stderr=terminal,
    )  # fmt: skip
    os.close(terminal)
    output = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        output += chunk
    assert proc.wait(180) == 0
    os.close(controller)
    text = output.decode("utf-8", "replace")
    assert "\x1b[" in text  # drawn with terminal control sequences (by rich), not plain lines
    assert f"run {run_id} succeeded" in text
    assert "amount_by_country_to_file" in text and "executor-" in text
