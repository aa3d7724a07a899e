"""`etl run --param`, `etl runs show` with values, `etl backfill [--wait]` and
`etl backfills list|show|cancel`, as a user runs them against a real gunicorn (no executors:
runs stay queued, so a waited-for backfill ends by its cancel)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.service.api.test_run_params import daily_plan
from tests.integration.service.client import test_commands
from tests.integration.service.client.test_commands import ROOT, etl, ok, read_json, write_doc

env = test_commands.env  # the fixture: a gunicorn on this test's database, its client's env


def test_run_with_params_and_runs_show(env: dict[str, str], tmp_path: Path) -> None:
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "daily", daily_plan())))
    run = read_json(env, "run", "daily", "--param", "day=2026-12-01")
    assert run["params"] == {"day": "2026-12-01", "region": "north", "run_id": run["id"]}
    assert "params: day=2026-12-01 region=north" in ok(env, "runs", "show", run["id"])
    bad = etl(env, "run", "daily", "--param", "day=2026-02-30")
    assert bad.returncode == 5 and "params.day" in bad.stderr
    usage = etl(env, "run", "daily", "--param", "day")
    assert usage.returncode == 2 and "expected NAME=VALUE" in usage.stderr
    again = read_json(env, "runs", "rerun", run["id"])
    assert again["id"] != run["id"] and again["params"]["day"] == "2026-12-01"
    assert ok(env, "runs", "rerun", run["id"]).startswith("rerun: run ")


def test_backfill_show_cancel_and_wait(env: dict[str, str], tmp_path: Path) -> None:
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "daily", daily_plan())))
    made = read_json(
        env, "backfill", "daily", "--param", "day", "--from", "2013-01-01", "--to", "2013-01-03"
    )
    assert (made["status"], made["total"], made["pending"]) == ("running", 3, 1)
    shown = ok(env, "backfills", "show", made["id"]).splitlines()
    assert "0/3 succeeded, 0 failed, 1 pending" in shown[0]
    assert [line.split()[:2] for line in shown[2:]] == [
        ["2013-01-01", "queued"], ["2013-01-02", "queued"], ["2013-01-03", "pending"]
    ]  # fmt: skip
    assert ok(env, "backfills", "cancel", made["id"]).startswith("canceled: canceled: 0/3")

    waiting = subprocess.Popen(
        [sys.executable, "-m", "service", "backfill", "daily", "--param", "day",
         "--from", "2014-01-01", "--to", "2014-01-02", "--wait"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert waiting.stdout is not None
    first = waiting.stdout.readline()
    assert first.startswith("backfill ") and "2 values of day" in first
    ok(env, "backfills", "cancel", first.split()[1].rstrip(":"))
    out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 3
    assert out.splitlines()[-1].startswith("canceled: 0/2 succeeded")


def test_backfill_of_a_schedules_intervals_and_the_list(
    env: dict[str, str], tmp_path: Path
) -> None:
    plan = daily_plan()
    plan["params"]["day"]["default"] = "2026-01-01"
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "daily", plan)))
    schedule = read_json(env, "schedules", "add", "daily", "--daily-at", "06:30")
    by_day = read_json(
        env, "backfill", "daily", "--param", "day", "--from", "2013-01-01", "--to", "2013-01-02"
    )
    span = ["--from", "2013-01-01T00:00:00Z", "--to", "2013-01-03T06:30:00Z"]
    said = ok(env, "backfill", "daily", "--schedule", schedule["id"], *span)
    assert said.startswith("backfill ") and f"3 intervals of schedule {schedule['id']}" in said
    listed = read_json(env, "backfills", "list", "daily")
    assert [b["id"] for b in listed][1] == by_day["id"]
    assert (listed[0]["schedule_id"], listed[0]["total"]) == (schedule["id"], 3)
    assert listed[0]["id"] == said.split()[1].rstrip(":")
    rows = ok(env, "backfills", "list", "daily").splitlines()
    assert rows[0].split()[:4] == ["BACKFILL", "STATUS", "OF", "RANGE"]
    assert rows[1].split()[1:4] == ["running", "schedule", schedule["id"]]
    assert "2013-01-01T06:30:00Z .. 2013-01-03T06:30:00Z" in rows[1]
    assert rows[2].split()[1:3] == ["running", "day"] and "0/2" in rows[2]
    assert len(read_json(env, "backfills", "list", "daily", "--limit", "1")) == 1
    both = etl(env, "backfill", "daily", "--param", "day", "--schedule", schedule["id"], *span)
    assert both.returncode == 2 and "not allowed with" in both.stderr
