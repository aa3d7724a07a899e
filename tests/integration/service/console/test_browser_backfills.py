"""Backfills and Rerun in the console, in a real headless Chromium against the real
topology: a backfill started from its form runs every value while its page follows the
progress by itself; a waiting one is canceled from its page; a run that failed on its input
offers Rerun on the fixed revision beside Resume on its own, and the rerun succeeds. axe-core
finds nothing on these pages, and none is wider than a phone's screen."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, expect

from drills import ADMIN_TOKEN, Stack

from .browsing import axe_violations
from .test_browser import browser, open_page, run_id_of, sign_in  # noqa: F401 (the fixture)

DAYS = ("2013-01-01", "2013-01-02", "2013-01-03")
STACK_FILES = {
    **{f"day-{d}.csv": f"id,day\n1,{d}\n2,{d}\n" for d in DAYS},
    "bad.csv": "id,name\n1,ada\nnot a number,bob\n",
}
DAILY = {
    "params": {"day": {"type": "date"}},
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "day-{day}.csv", "columns": {"id": "int"}}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "out-{day}.jsonl"}},
    ],
}  # fmt: skip


def test_a_backfill_from_its_form_to_the_end_and_a_cancel(browser: Browser, stack: Stack) -> None:  # noqa: F811
    stack.start()
    pid = stack.create("daily", DAILY)
    page = open_page(browser, stack)
    sign_in(page, ADMIN_TOKEN)
    page.goto(f"/ui/pipelines/{pid}")
    page.click("#backfills-link")
    page.select_option("#backfill-param", "day")
    page.fill("#backfill-from", DAYS[0])
    page.fill("#backfill-to", DAYS[-1])
    page.click("#backfill-start")
    expect(page).to_have_url(re.compile(r"/ui/backfills/[0-9a-f-]{36}\?notice=backfill_started$"))
    # the page follows the backfill by itself to its end
    expect(page.locator("h1 .badge")).to_have_text("succeeded")
    expect(page.locator("#backfill-counts")).to_have_text(
        "3 succeeded · 0 failed · 0 pending · 3 in all"
    )
    rows = page.locator("table.backfill-values tbody tr")
    expect(rows).to_have_count(3)
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.value)") == list(DAYS)
    expect(page.locator("table.backfill-values .badge.st-succeeded")).to_have_count(3)
    expect(page.locator("#backfill-cancel")).to_have_count(0)
    assert axe_violations(page) == []
    rows.nth(1).locator("a").click()
    expect(page.locator("#run-params")).to_have_text("day=2013-01-02")
    run = stack.run(run_id_of(page))
    assert run["status"] == "succeeded" and run["params"]["day"] == "2013-01-02"

    # a backfill of a paused pipeline waits; its Cancel drops every value
    assert stack.call("POST", f"/pipelines/{pid}/pause")[0] == 200
    page.goto(f"/ui/pipelines/{pid}/backfills")
    page.fill("#backfill-from", DAYS[0])
    page.fill("#backfill-to", DAYS[1])
    page.click("#backfill-start")
    expect(page.locator("#backfill-counts")).to_have_text(
        "0 succeeded · 0 failed · 2 pending · 2 in all"
    )
    page.click("#backfill-cancel")
    expect(page.locator("h1 .badge")).to_have_text("canceled")
    expect(page.locator("table.backfill-values .badge.st-canceled")).to_have_count(2)
    page.goto(f"/ui/pipelines/{pid}/backfills")
    expect(page.locator("table.backfills tbody tr")).to_have_count(2)
    expect(page.locator("table.backfills .badge")).to_have_text(["canceled", "succeeded"])
    assert axe_violations(page) == []
    # on a phone neither page is wider than the screen (tables scroll in their region)
    phone = page.context.browser.new_context(
        base_url=f"http://127.0.0.1:{stack.port}", viewport={"width": 390, "height": 844}
    ).new_page()
    sign_in(phone, ADMIN_TOKEN)
    backfill_id = page.locator("a.backfill-link").first.get_attribute("href")
    for path in (f"/ui/pipelines/{pid}/backfills", backfill_id):
        phone.goto(path)
        assert phone.evaluate("() => document.documentElement.scrollWidth") <= 390, path


def test_a_run_failed_on_its_input_offers_rerun_on_the_fixed_revision(
    browser: Browser,  # noqa: F811
    stack: Stack,
) -> None:
    stack.start()
    plan = {"on_row_error": "stop", "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "bad.csv", "columns": {"id": "int"}}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "names.jsonl"}}]}  # fmt: skip
    pid = stack.create("names", plan)
    status, run = stack.trigger(pid)
    assert status == 201, run
    assert stack.wait_run(run["id"], timeout=120)["status"] == "failed"
    page = open_page(browser, stack)
    sign_in(page, ADMIN_TOKEN)
    page.goto(f"/ui/runs/{run['id']}")
    expect(page.locator("#resume")).to_have_text("Resume run")
    expect(page.locator("#rerun")).to_have_count(0)  # no other revision: nothing to offer

    fixed = {**plan, "on_row_error": "reject"}
    assert stack.call("PATCH", f"/pipelines/{pid}", {"plan": fixed})[0] == 200
    page.reload()
    offer = page.locator("#rerun-offer")
    expect(offer).to_contain_text("Resume can only fail again")
    expect(offer).to_contain_text("revision 1 (this run's plan), and read failed on its input")
    expect(offer).to_contain_text("new run on revision 2 (the pipeline's current plan)")
    expect(page.locator("#resume")).to_have_text("Resume run on revision 1")
    assert axe_violations(page) == []
    page.click("#rerun")
    expect(page).to_have_url(re.compile(r"/ui/runs/[0-9a-f-]{36}\?notice=rerun$"))
    assert run_id_of(page) != run["id"]
    expect(page.locator("h1 .badge")).to_have_text("succeeded")
    expect(page.locator("#run-facts")).to_contain_text("revision 2")
    expect(page.locator("#rerun")).to_have_count(0)
