"""What a new user meets in the first hour with the `etl` client: output cut short by
`| head`, a paused pipeline, a missing plan file, webhooks, long messages on a pipe and an
`ETL_API_URL` without a scheme. Subprocesses of `etl` against a real gunicorn (the `env`
fixture of test_commands.py) on this test's database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.integration.service.client import test_commands
from tests.integration.service.client.test_commands import ROOT, etl, ok, read_json, write_doc
from tests.integration.testapp import plan_copy

env = test_commands.env  # the fixture: an `etl` client's environment, a gunicorn behind it

CUSTOMERS = ROOT / "fixtures" / "plans" / "customers.json"


def etl_into_closed_pipe(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`etl ARGS | head -0`: standard output is a pipe whose reader is already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "service", *args],
            env=env, cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(write)


def test_output_cut_short_by_its_reader_ends_quietly_with_exit_0(
    env: dict[str, str], tmp_path: Path
) -> None:
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "piped", plan_copy())))
    run_id = read_json(env, "run", "piped")["id"]
    for args in (
        ["pipelines", "list"],
        ["pipelines", "show", "piped"],
        ["pipelines", "list", "--json"],
        ["runs", "list"],
        ["runs", "show", run_id],
        ["validate", str(CUSTOMERS)],
        ["preview", str(CUSTOMERS)],
        ["--help"],
    ):
        done = etl_into_closed_pipe(env, *args)
        assert (done.returncode, done.stderr) == (0, ""), args


def test_a_paused_pipeline_says_so_in_list_and_show_and_the_api_list(
    env: dict[str, str], tmp_path: Path
) -> None:
    for name in ("held", "going"):
        ok(env, "pipelines", "apply", str(write_doc(tmp_path, name, plan_copy())))
        ok(env, "schedules", "add", name, "--every-minutes", "60")
    ok(env, "pipelines", "pause", "held")
    items = {p["name"]: p for p in read_json(env, "pipelines", "list")}
    assert (items["held"]["paused"], items["going"]["paused"]) == (True, False)
    lines = ok(env, "pipelines", "list").splitlines()
    header = lines[0].split()
    assert header[:7] == ["NAME", "REV", "STEPS", "LAST", "RUN", "STATE", "NEXT"]
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    assert rows["held"][4:6] == ["paused", "-"]  # no next fire: its schedules make no run
    assert rows["going"][4] == "active" and rows["going"][5].startswith("20")
    shown = ok(env, "pipelines", "show", "held").splitlines()
    assert shown[1].startswith("paused: triggers are refused")
    assert "etl pipelines unpause held" in shown[1]
    assert "paused" not in ok(env, "pipelines", "show", "going")


def test_a_plan_file_that_cannot_be_read_is_exit_2_for_validate_apply_and_preview(
    env: dict[str, str], tmp_path: Path
) -> None:
    missing = str(tmp_path / "nope.json")
    for args in (["validate", missing], ["pipelines", "apply", missing], ["preview", missing]):
        done = etl(env, *args)
        assert (done.returncode, "nope.json" in done.stderr + done.stdout) == (2, True), args
    invalid = etl(env, "validate", str(ROOT / "fixtures" / "plans" / "invalid_cycle.json"))
    assert invalid.returncode == 1  # a plan read but invalid stays 1


def test_webhooks_add_list_delete(env: dict[str, str], tmp_path: Path) -> None:
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, "hooked", plan_copy())))
    added = etl(env, "webhooks", "add", "hooked", "http://127.0.0.1:9/hook")
    assert added.returncode == 0, added.stderr
    assert "added webhook " in added.stderr and "shown this once" in added.stderr
    assert len(added.stdout.strip()) >= 16  # the generated secret, alone
    failed_only = read_json(
        env, "webhooks", "add", "hooked", "https://example.com/x", "--event", "run.failed",
        "--secret", "s" * 16,
    )  # fmt: skip
    assert failed_only["events"] == ["run.failed"] and failed_only["secret"] == "s" * 16
    listed = read_json(env, "webhooks", "list", "hooked")
    assert {w["url"] for w in listed} == {"http://127.0.0.1:9/hook", "https://example.com/x"}
    table = ok(env, "webhooks", "list", "hooked").splitlines()
    assert table[0].split() == ["WEBHOOK", "EVENTS", "URL", "LAST", "DELIVERY"]
    assert any("run.failed,run.succeeded,run.skipped" in ln for ln in table[1:])
    gone = ok(env, "webhooks", "delete", "hooked", failed_only["id"])
    assert gone.startswith(f"deleted webhook {failed_only['id']}")
    assert [w["url"] for w in read_json(env, "webhooks", "list", "hooked")] == [
        "http://127.0.0.1:9/hook"
    ]
    bad = etl(env, "webhooks", "add", "hooked", "ftp://x")
    assert bad.returncode == 5 and "API error 400 validation_error" in bad.stderr


def test_long_messages_on_a_pipe_are_one_line_each(env: dict[str, str], tmp_path: Path) -> None:
    name = "a-pipeline-with-a-name-long-enough-to-pass-eighty-columns-in-a-message"
    ok(env, "pipelines", "apply", str(write_doc(tmp_path, name, plan_copy())))
    ok(env, "pipelines", "pause", name)
    refused = etl(env, "run", name)
    assert refused.returncode == 4
    (line,) = refused.stderr.splitlines()
    assert line.startswith("etl: trigger refused (pipeline_paused)") and len(line) > 80


def test_an_api_url_without_a_scheme_is_a_usage_error_naming_it(env: dict[str, str]) -> None:
    bind = env["ETL_API_BIND"]
    done = etl({**env, "ETL_API_URL": bind}, "pipelines", "list")
    assert done.returncode == 2, done.stderr
    assert f"ETL_API_URL {bind!r} is not an http:// or https:// URL" in done.stderr
    assert "coordinator running" not in done.stderr
