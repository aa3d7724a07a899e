"""The web console in a real headless Chromium (the system's, found by tests/programs.py,
driven by playwright; no browser download) against the real topology: `etl up`-like
processes from `drills.Stack`."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from dag.durations import seconds_text
from drills import ADMIN_TOKEN, Stack
from tests.programs import program

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
WAIT_MS = 120_000  # an upper bound for slow shared machines, never a measured duration
# docs/img/run-page.png is this test's screenshot; set ETL_CONSOLE_SCREENSHOT to a path to
# write it there (a plain run keeps it in tmp and leaves the work tree alone).
SCREENSHOT_ENV = "ETL_CONSOLE_SCREENSHOT"
N = 6000
EVIL = "<script>window.__xss = 1</script>"
PLAN = {
    "on_row_error": "reject",
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "nums.csv", "columns": {"id": "int"}}},
        {"name": "clean", "type": "transform", "depends_on": ["read"],
         "config": {"op": "normalize_whitespace", "columns": ["text"]}},
        {"name": "out", "type": "export", "depends_on": ["clean"],
         "config": {"target": "file", "path": "nums.jsonl"}},
        {"name": "to_table", "type": "export", "depends_on": ["clean"],
         "config": {"target": "table", "table": "nums"}},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=program("chromium"), args=CHROMIUM_ARGS)
        yield b
        b.close()


# the `stack` fixture (tests/integration/conftest.py) reads these
STACK_ENV = {"ETL_FAULT": "slow_batches:step=out:ms=300"}
BAD_ROW = '<script>alert(1)</script>,"a bad id"\n'  # rejected: its raw value must show as text
STACK_FILES = {
    "nums.csv": lambda: (
        "id,text\n"
        + BAD_ROW
        + "".join(f'{i},"line {i}\n  second,   line"\n' for i in range(1, N + 1))
    )
}


def open_page(browser: Browser, stack: Stack) -> Page:
    page = browser.new_context(base_url=f"http://127.0.0.1:{stack.port}").new_page()
    page.set_default_timeout(WAIT_MS)
    page.on("dialog", lambda d: pytest.fail(f"a script ran: dialog {d.message!r}"))
    return page


def sign_in(page: Page, token: str) -> None:
    page.goto("/ui/")
    expect(page).to_have_url(re.compile(r"/ui/login$"))
    page.fill("input[name=token]", token)
    page.click("#sign-in")
    expect(page.locator("header .principal")).to_be_visible()


def live_attempt(stack: Stack, run_id: str):
    rows = stack.sql(
        "SELECT number, executor, batches_done FROM attempts WHERE run_id = %s"
        " AND step_name = 'out' AND outcome IS NULL AND executor IS NOT NULL",
        run_id,
    )
    return rows[0] if rows else None


def run_id_of(page: Page) -> str:
    return re.search(r"/ui/runs/([0-9a-f-]{36})", page.url).group(1)


def test_trigger_watch_progress_and_a_killed_executor_on_the_timeline(
    browser: Browser, stack: Stack, tmp_path: Path
) -> None:
    stack.start()
    stack.create("nums", PLAN)
    page = open_page(browser, stack)
    sign_in(page, ADMIN_TOKEN)
    page.click("a.pipeline-link:text('nums')")
    # the DAG: one node per step, one edge per depends_on
    expect(page.locator("svg.dag g.node")).to_have_count(4)
    edges = page.locator("svg.dag path.edge").evaluate_all(
        "els => els.map(e => e.dataset.from + '>' + e.dataset.to)"
    )
    assert sorted(edges) == ["clean>out", "clean>to_table", "read>clean"]
    page.click("button.trigger")
    expect(page).to_have_url(re.compile(r"/ui/runs/[0-9a-f-]{36}\?notice=created$"))
    run_id = run_id_of(page)
    # the page updates itself (no reload by the test): the slow step shows a partial progress
    out = page.locator('svg.dag g.node[data-step="out"]')
    expect(out).to_have_attribute("data-status", "running")
    expect(out.locator("text.pct")).to_have_text(re.compile(r"^([1-9]|[1-9][0-9])%$"))
    _, executor, _ = stack.wait_for(
        lambda: (a := live_attempt(stack, run_id)) and a[2] >= 3 and a, what="3 batches"
    )
    killed = executor.split(":")[0]
    stack.kill(killed, signal.SIGKILL)
    # the other executor takes over once the lease lapses; the timeline shows both attempts
    expect(page.locator("h1 .badge")).to_have_text("succeeded")
    expect(out).to_have_attribute("data-status", "succeeded")
    expect(out.locator("text.pct")).to_have_text("100%")
    bars = page.locator('svg.gantt g.attempt[data-step="out"]')
    expect(bars).to_have_count(2)
    first, second = bars.nth(0), bars.nth(1)
    expect(first).to_have_attribute("data-outcome", "lease_expired")
    expect(first).to_have_attribute("data-executor", killed)
    expect(second).to_have_attribute("data-outcome", "succeeded")
    assert second.get_attribute("data-executor") not in (killed, None)
    expect(second.locator("text.bar-label")).to_contain_text("taken over after")
    # rejected rows come from the reject file and render as text
    rejects = page.locator('section.rejects[data-step="read"]')
    expect(rejects.locator("td.raw").first).to_contain_text("<script>alert(1)</script>")
    expect(rejects.locator("code.reject-path")).to_have_text(
        str(stack.rejects / run_id / "read.jsonl")
    )
    exports = page.locator("table.exports")
    expect(exports).to_contain_text(str(stack.exports / run_id / "nums.jsonl"))
    expect(exports).to_contain_text(f"{N:,} rows")
    expect(page.locator("#trace-id")).to_have_text(stack.run(run_id)["trace_id"])
    assert page.locator("body[data-refresh-ms]").count() == 0  # polling stopped at the end
    shot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "run-page.png")
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes().startswith(b"\x89PNG")


def test_cancel_resume_viewer_escaping_and_csrf(browser: Browser, stack: Stack) -> None:
    stack.start()
    missing = {"steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "later.csv", "columns": {"id": "int"}}},
        {"name": "save", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "later.jsonl"}}]}  # fmt: skip
    evil_id = stack.create(EVIL, missing)
    slow_id = stack.create("slow", PLAN)
    page = open_page(browser, stack)
    sign_in(page, ADMIN_TOKEN)
    # escaping: the pipeline named like a script shows as text and runs nothing
    expect(page.locator("table.pipelines")).to_contain_text(EVIL)
    page.goto(f"/ui/pipelines/{evil_id}")
    expect(page.locator("h1 .name")).to_have_text(EVIL)
    page.fill("input[name=trigger_key]", '"><img src=x onerror="window.__xss=2">')
    page.click("button.trigger")
    assert page.evaluate("() => window.__xss") is None
    # resume: the source is missing, the run fails; once the file exists, Resume finishes it
    expect(page.locator("h1 .badge")).to_have_text("failed")
    expect(page.locator("#run-facts")).to_contain_text("later.csv")
    failed_id = run_id_of(page)
    (stack.data / "later.csv").write_text("id\n1\n2\n")
    page.click("#resume")
    expect(page.locator("p.notice")).to_have_text(re.compile("Run resumed"))
    expect(page.locator("h1 .badge")).to_have_text("succeeded")
    expect(page.locator("#resume")).to_have_count(0)
    _the_resumed_runs_duration_counts_from_its_first_start(page, stack.run(failed_id))
    # cancel: a running run stops at its next batch boundary
    page.goto(f"/ui/pipelines/{slow_id}")
    page.click("button.trigger")
    expect(page.locator('svg.dag g.node[data-step="out"]')).to_have_attribute(
        "data-status", "running"
    )
    slow_run = run_id_of(page)
    page.click("#cancel")
    expect(page.locator("p.notice")).to_have_text(re.compile("Cancel requested"))
    expect(page.locator("h1 .badge")).to_have_text("canceled")
    expect(page.locator("#cancel")).to_have_count(0)
    # CSRF: a POST with the session cookie but without the form's token is refused
    forged = page.request.post(f"/ui/runs/{failed_id}/resume", form={"csrf": "forged"})
    assert forged.status == 403 and "CSRF" in forged.text()
    assert stack.run(failed_id)["status"] == "succeeded"
    paths = ("/ui/", f"/ui/pipelines/{slow_id}", f"/ui/runs/{slow_run}", f"/ui/runs/{failed_id}")
    _a_viewer_sees_no_buttons_and_may_not_post(browser, stack, paths, slow_id)


def _the_resumed_runs_duration_counts_from_its_first_start(page: Page, run: dict) -> None:
    """Not from the resume (a resume of a quick step read "0.0 s" for a run that ran before)."""
    first = datetime.fromisoformat(run["steps"][0]["attempts"][0]["started_at"])
    assert datetime.fromisoformat(run["started_at"]) <= first
    took = datetime.fromisoformat(run["finished_at"]) - datetime.fromisoformat(run["started_at"])
    expect(page.locator("#run-duration")).to_have_text(seconds_text(took.total_seconds()))


def _a_viewer_sees_no_buttons_and_may_not_post(
    browser: Browser, stack: Stack, paths: tuple[str, ...], pipeline_id: str
) -> None:
    """A viewer: the same pages, no buttons; their POST with a valid CSRF token gets 403."""
    token = stack.etl("token", "create", "--role", "pipeline_viewer", "--name", "viewer")
    viewer = open_page(browser, stack)
    sign_in(viewer, token.strip())
    for path in paths:
        viewer.goto(path)
        expect(viewer.locator("main")).to_be_visible()
        expect(viewer.locator("button.action")).to_have_count(0)
        assert viewer.locator("form[method=post]").evaluate_all(
            "fs => fs.map(f => f.getAttribute('action'))"
        ) == ["/ui/logout"]  # fmt: skip
    csrf = viewer.locator("input[name=csrf]").first.get_attribute("value")
    refused = viewer.request.post(f"/ui/pipelines/{pipeline_id}/trigger", form={"csrf": csrf})
    assert refused.status == 403
    assert stack.sql("SELECT count(*) FROM runs WHERE pipeline_id = %s", pipeline_id)[0][0] == 1
