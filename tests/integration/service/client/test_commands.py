"""The `etl` API client commands as a user runs them: subprocesses of `etl` against a real
gunicorn serving the API (no executors: runs stay queued), on this test's database. Output
is not a terminal here, so tables and progress come as plain lines."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from drills import free_port
from service.config import Config
from service.domain.principals import ADMIN, VIEWER
from service.domain.runs import PIPELINE_ACTIVE_LIMIT
from service.run.gunicorn import gunicorn_argv
from tests.integration.testapp import TOKENS, plan_copy, seed_principals

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture
def env(db_url: str) -> Iterator[dict[str, str]]:
    """The environment of an `etl` client talking to a one-worker gunicorn on this test's
    database as the admin."""
    seed_principals(db_url)
    port = free_port()
    cfg = Config(database_url=db_url, api_bind=f"127.0.0.1:{port}", api_workers=1)
    server_env = {**os.environ, "ETL_DATABASE_URL": db_url, "ETL_LOG_LEVEL": "WARNING"}
    log = Path(tempfile.mkstemp(prefix="gunicorn-", suffix=".log")[1])
    with log.open("wb") as out:
        proc = subprocess.Popen(gunicorn_argv(cfg), env=server_env, stdout=out, stderr=out)
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"gunicorn did not start: {log.read_text()[-3000:]}")
                time.sleep(0.1)
        client_env = {k: v for k, v in os.environ.items() if not k.startswith("ETL_")}
        yield {**client_env, "ETL_API_BIND": f"127.0.0.1:{port}", "ETL_TOKEN": TOKENS[ADMIN]}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def etl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def ok(env: dict[str, str], *args: str) -> str:
    done = etl(env, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def read_json(env: dict[str, str], *args: str) -> Any:
    return json.loads(ok(env, *args, "--json"))


def sql(db_url: str, query: str, *params: Any) -> list[tuple]:
    conn = psycopg2.connect(db_url)
    try:
        with conn, conn.cursor() as cur:
            cur.execute(query, params or None)
            return cur.fetchall()
    finally:
        conn.close()


def write_doc(tmp_path: Path, name: str, plan: dict) -> Path:
    path = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps({"name": name, "plan": plan}))
    return path


def test_apply_creates_then_patches_only_a_changed_plan(
    env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    plan = plan_copy()
    first = ok(env, "pipelines", "apply", str(write_doc(tmp_path, "orders", plan)))
    assert first.startswith("created pipeline orders (") and "revision 1" in first
    same = ok(env, "pipelines", "apply", str(write_doc(tmp_path, "orders", plan_copy())))
    assert same == "unchanged: pipeline orders stays at revision 1\n"
    plan["steps"][1]["config"]["op"] = "trim"
    changed = read_json(env, "pipelines", "apply", str(write_doc(tmp_path, "orders", plan)))
    assert (changed["outcome"], changed["pipeline"]["revision"]) == ("updated", 2)
    assert sql(db_url, "SELECT number FROM revisions ORDER BY number") == [(1,), (2,)]
    again = read_json(env, "pipelines", "apply", str(write_doc(tmp_path, "orders", plan)))
    assert (again["outcome"], again["pipeline"]["revision"]) == ("unchanged", 2)


def test_pipelines_list_and_show(env: dict[str, str], tmp_path: Path) -> None:
    for name in ("alpha", "beta"):
        ok(env, "pipelines", "apply", str(write_doc(tmp_path, name, plan_copy())))
    listed = ok(env, "pipelines", "list").splitlines()
    assert listed[0].split()[:5] == ["NAME", "REV", "STEPS", "LAST", "RUN"]
    assert [ln.split()[0] for ln in listed[1:]] == ["beta", "alpha"]
    items = read_json(env, "pipelines", "list")
    assert [p["name"] for p in items] == ["beta", "alpha"]
    assert read_json(env, "pipelines", "list", "--limit", "1")[0]["name"] == "beta"
    by_name = read_json(env, "pipelines", "show", "alpha")
    by_id = read_json(env, "pipelines", "show", by_name["id"])
    assert by_name == by_id and by_name["plan"] == plan_copy()
    shown = ok(env, "pipelines", "show", "alpha")
    assert "revision 1" in shown.splitlines()[0]
    assert [ln.split()[0] for ln in shown.splitlines()[3:]] == ["read", "clean", "to_file"]


def test_run_and_runs_commands(env: dict[str, str], db_url: str, tmp_path: Path) -> None:
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "nightly", plan_copy())))
    out = ok(env, "run", "nightly", "--key", "k1")
    assert out.startswith("triggered: run ") and " queued (queue position 1)" in out
    run_id = out.split()[2]
    again = ok(env, "run", "nightly", "--key", "k1")
    assert again.startswith(f"existing run for this key: run {run_id} queued")
    second = read_json(env, "run", "nightly")
    assert second["status"] == "queued" and second["id"] != run_id

    listed = read_json(env, "runs", "list", "--pipeline", "nightly", "--status", "queued")
    assert [r["id"] for r in listed] == [second["id"], run_id]
    assert read_json(env, "runs", "list", "--status", "failed") == []
    table = ok(env, "runs", "list").splitlines()
    assert table[0].split()[:3] == ["RUN", "PIPELINE", "STATUS"]
    assert table[1].split()[:5] == [second["id"], "nightly", "queued", "0/3", "succeeded"]

    assert read_json(env, "runs", "show", run_id)["trigger_key"] == "k1"
    shown = ok(env, "runs", "show", run_id).splitlines()
    assert shown[0] == f"run {run_id} queued (queue position 1)"
    assert [ln.split()[:2] for ln in shown[1:]] == [
        ["read", "pending"],
        ["clean", "pending"],
        ["to_file", "pending"],
    ]
    assert ok(env, "runs", "cancel", run_id).startswith(f"canceled: run {run_id} canceled")
    assert sql(db_url, "SELECT status FROM runs WHERE id = %s", run_id) == [("canceled",)]
    # Watching a run that already ended prints it once and exits with how it ended.
    watched = etl(env, "runs", "watch", run_id)
    assert watched.returncode == 3, watched.stderr
    assert watched.stdout.splitlines()[-1] == f"run {run_id} canceled"


def test_runs_show_and_list_say_how_long_runs_and_steps_took_or_have_been_running(
    env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "timed", plan_copy())))
    done, going = (ok(env, "run", "timed", "--key", key).split()[2] for key in ("a", "b"))
    sql(db_url, "UPDATE runs SET status = 'succeeded', started_at = now() - interval '1 minute',"
        " finished_at = now() - interval '1 minute' + interval '4.25 seconds'"
        " WHERE id = %s RETURNING id", done)  # fmt: skip
    sql(db_url, "UPDATE runs SET status = 'running', started_at = now() - interval '754 seconds'"
        " WHERE id = %s RETURNING id", going)  # fmt: skip
    sql(db_url, "INSERT INTO step_runs (run_id, name, type, position, status, started_at,"
        " finished_at) VALUES"
        " (%s, 'read', 'ingest', 0, 'succeeded', now() - interval '754 seconds',"
        "  now() - interval '751 seconds'),"
        " (%s, 'clean', 'transform', 1, 'running', now() - interval '700 seconds', NULL),"
        " (%s, 'to_file', 'export', 2, 'pending', NULL, NULL) RETURNING name",
        going, going, going)  # fmt: skip
    # the server's clock (its Date header, to the second) against the server's timestamps
    shown = ok(env, "runs", "show", going).splitlines()
    assert re.fullmatch(rf"run {going} running \(running for 12 min 3[2-5] s\)", shown[0]), shown
    assert shown[1].split()[:2] == ["read", "succeeded"] and shown[1].endswith("  took 3.0 s")
    assert re.search(r"  running for 11 min (3[89]|4[01]) s$", shown[2]), shown
    assert shown[3].split()[:2] == ["to_file", "pending"] and shown[3].endswith("  -")
    assert ok(env, "runs", "show", done).splitlines()[0] == f"run {done} succeeded (took 4.2 s)"
    table = ok(env, "runs", "list", "--pipeline", "timed").splitlines()
    assert table[0].split()[-1] == "DURATION"
    assert re.search(r"  running for 12 min 3[2-5] s$", table[1]) and going in table[1], table
    assert table[2].endswith("  4.2 s") and done in table[2], table


def test_a_refused_trigger_and_a_refused_resume_exit_4(
    env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "busy", plan_copy())))
    for _ in range(PIPELINE_ACTIVE_LIMIT):
        ok(env, "run", "busy")
    refused = etl(env, "run", "busy", "--wait")
    assert refused.returncode == 4
    assert "trigger refused (queue_full)" in refused.stderr
    assert sql(db_url, "SELECT count(*) FROM runs WHERE status = 'skipped'") == [(1,)]
    (failed,) = sql(db_url, "SELECT id::text FROM runs WHERE status = 'queued' LIMIT 1")[0]
    sql(db_url, "UPDATE runs SET status = 'failed' WHERE id = %s RETURNING id", failed)
    ok(env, "run", "busy")  # the freed slot is taken again
    resumed = etl(env, "runs", "resume", failed)
    assert (resumed.returncode, "resume refused (queue_full)" in resumed.stderr) == (4, True)


def test_pause_refuses_triggers_with_exit_4_until_unpaused(
    env: dict[str, str], tmp_path: Path
) -> None:
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "held", plan_copy())))
    assert ok(env, "pipelines", "pause", "held").strip() == "held is paused"
    assert read_json(env, "pipelines", "show", "held")["paused"] is True
    refused = etl(env, "run", "held")
    assert refused.returncode == 4
    assert "trigger refused (pipeline_paused)" in refused.stderr
    assert ok(env, "pipelines", "unpause", "held").strip() == "held is not paused"
    assert etl(env, "run", "held").returncode == 0


def test_schedules_add_list_delete(env: dict[str, str], tmp_path: Path) -> None:
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "hourly", plan_copy())))
    added = read_json(env, "schedules", "add", "hourly", "--every-minutes", "60")
    daily = ok(env, "schedules", "add", "hourly", "--daily-at", "06:30")
    assert daily.startswith("added schedule ") and "next fire 20" in daily
    every = read_json(env, "schedules", "add", "hourly", "--daily-at", "00:00", "--catchup", "all")
    assert (added["catchup"], every["catchup"]) == ("latest", "all")
    ok(env, "schedules", "delete", "hourly", every["id"])
    listed = read_json(env, "schedules", "list", "hourly")
    assert len(listed) == 2 and added["id"] in {s["id"] for s in listed}
    table = ok(env, "schedules", "list", "hourly").splitlines()
    assert {" ".join(ln.split()[1:3]) for ln in table[1:]} == {"every 60", "daily 06:30"}
    assert ok(env, "schedules", "delete", "hourly", added["id"]).startswith("deleted schedule")
    assert [s["id"] for s in read_json(env, "schedules", "list", "hourly")] != [added["id"]]
    bad = etl(env, "schedules", "add", "hourly", "--every-minutes", "3")
    assert bad.returncode == 5
    assert "API error 400 validation_error" in bad.stderr and "every_minutes:" in bad.stderr
    no_file = etl(env, "schedules", "add", "hourly", "--watch", "in/*.csv")  # no `file` param
    assert no_file.returncode == 5 and "string parameter 'file'" in no_file.stderr
    watched = {**plan_copy(), "params": {"file": {"type": "string"}}}
    watched["steps"][0]["config"]["path"] = "{file}"
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "files", watched)))
    added = ok(env, "schedules", "add", "files", "--watch", "in/*.csv")
    assert added.endswith("one run per new file matching in/*.csv\n")
    (line,) = ok(env, "schedules", "list", "files").splitlines()[1:]
    assert line.split()[1:6] == ["files", "in/*.csv", "on", "arrival", "(0"]


def test_errors_are_clear(env: dict[str, str], tmp_path: Path) -> None:
    broken = plan_copy()
    broken["steps"][1]["depends_on"] = ["nope"]
    invalid = etl(env, "pipelines", "apply", str(write_doc(tmp_path, "broken", broken)))
    assert invalid.returncode == 5
    assert "API error 400 invalid_plan" in invalid.stderr
    assert "plan.steps[1].depends_on[0]:" in invalid.stderr

    viewer = {**env, "ETL_TOKEN": TOKENS[VIEWER]}
    forbidden = etl(viewer, "pipelines", "apply", str(write_doc(tmp_path, "x", plan_copy())))
    assert (forbidden.returncode, "API error 403 forbidden" in forbidden.stderr) == (5, True)
    assert etl(viewer, "pipelines", "list").returncode == 0

    unknown = etl(env, "run", "no-such-pipeline")
    assert (unknown.returncode, "API error 404 not_found" in unknown.stderr) == (5, True)
    bad_token = etl({**env, "ETL_TOKEN": "wrong"}, "runs", "list")
    assert (bad_token.returncode, "API error 401 unauthorized" in bad_token.stderr) == (5, True)

    no_token = etl({k: v for k, v in env.items() if k != "ETL_TOKEN"}, "pipelines", "list")
    assert (no_token.returncode, "ETL_TOKEN is not set" in no_token.stderr) == (2, True)
    gone = {**env, "ETL_API_URL": f"http://127.0.0.1:{free_port()}"}
    unreachable = etl(gone, "pipelines", "list")
    assert unreachable.returncode == 6
    assert "cannot reach the API at http://127.0.0.1:" in unreachable.stderr
    missing = etl(env, "pipelines", "apply", str(tmp_path / "missing.json"))
    assert (missing.returncode, "missing.json" in missing.stderr) == (2, True)


def test_token_create_list_rotate_revoke(env: dict[str, str]) -> None:
    made = etl(env, "token", "create", "--name", "ci", "--role", "pipeline_operator",
               "--expires-in", "30d")  # fmt: skip
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()  # the secret alone on stdout; what it is on stderr
    assert len(secret) > 30 and "shown this once" in made.stderr and "ci" in made.stderr
    as_ci = {**env, "ETL_TOKEN": secret}
    assert etl(as_ci, "runs", "list").returncode == 0
    (listed,) = [t for t in read_json(env, "token", "list") if t["name"] == "ci"]
    assert listed["role"] == "pipeline_operator" and listed["expires_at"] is not None
    assert secret not in ok(env, "token", "list")
    table = ok(env, "token", "list").splitlines()
    assert table[0].split()[:3] == ["ID", "NAME", "ROLE"]

    rotated = etl(env, "token", "rotate", "ci")
    assert rotated.returncode == 0, rotated.stderr
    new_secret = rotated.stdout.strip()
    assert new_secret != secret
    old = etl(as_ci, "runs", "list")
    assert (old.returncode, "API error 401" in old.stderr) == (5, True)
    as_new = {**env, "ETL_TOKEN": new_secret}
    assert etl(as_new, "runs", "list").returncode == 0

    assert ok(env, "token", "revoke", listed["id"]).startswith(f"revoked token ci ({listed['id']})")
    assert etl(as_new, "runs", "list").returncode == 5
    assert etl(env, "token", "revoke", "ci").returncode == 5  # no live token of that name
    bad = etl(env, "token", "create", "--name", "x", "--role", "pipeline_viewer",
              "--expires-in", "soon")  # fmt: skip
    assert (bad.returncode, "not a duration" in bad.stderr) == (2, True)
    role = etl(env, "token", "create", "--name", "x", "--role", "root")
    assert (role.returncode, "role:" in role.stderr) == (5, True)


def test_pipelines_delete_is_refused_while_a_run_is_queued(
    env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "old", plan_copy())))
    run_id = read_json(env, "run", "old")["id"]
    refused = etl(env, "pipelines", "delete", "old")
    assert refused.returncode == 5
    assert "API error 409 pipeline_active" in refused.stderr
    ok(env, "runs", "cancel", run_id)
    deleted = ok(env, "pipelines", "delete", "old")
    assert deleted.startswith("deleted pipeline old (") and "runs stay readable" in deleted
    assert read_json(env, "runs", "show", run_id)["status"] == "canceled"
    assert ok(env, "runs", "show", run_id).startswith(f"run {run_id} canceled")
    pipeline_id = deleted.split("(")[1].split(")")[0]
    assert [r["id"] for r in read_json(env, "runs", "list", "--pipeline", pipeline_id)] == [run_id]
    assert etl(env, "pipelines", "show", "old").returncode == 5
    created = ok(env, "pipelines", "apply", str(write_doc(tmp_path, "old", plan_copy())))
    assert created.startswith("created pipeline old (")
