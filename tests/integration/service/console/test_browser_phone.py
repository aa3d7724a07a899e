"""The console on a phone and by keyboard, in Chromium: no page is wider than a 390 px
screen, axe-core finds no violation on any page for a viewer, an operator and an admin (a
running run's page held still while axe reads it; a pipeline's backfills and one backfill's
page too, the form to start one shown to those who may), and the live refresh of a running run
keeps focus, scroll position and open details."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Browser, Page, expect

from drills import ADMIN_TOKEN, Stack

from .browsing import axe_violations
from .test_browser import WAIT_MS, browser  # noqa: F401 (the fixture)

PHONE = {"width": 390, "height": 844}
ROWS = 90_000  # 180 batches of a second each: the run stays running while the test looks
STACK_ENV = {"ETL_FAULT": "slow_batches:step=save:ms=1000"}
STACK_FILES = {
    "rows.csv": lambda: "id,name\n" + "".join(f"{i}, name {i} \n" for i in range(ROWS)),
    "few.csv": "id,name\n1,ada\nnot a number,bob\n3,cy\n",
}


# The outermost elements reaching past the screen's right edge (what makes a page too wide).
WIDE = """w => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > w + 0.5
               && e.parentElement.getBoundingClientRect().right <= w + 0.5
               && getComputedStyle(e.parentElement).overflowX === 'visible')
  .slice(0, 5).map(e => e.tagName.toLowerCase() + '.' + e.getAttribute('class')
                        + ' ' + Math.round(e.getBoundingClientRect().right) + ' px')"""


def _plan(path: str) -> dict:
    return {"on_row_error": "reject", "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": path, "columns": {"id": "int"}}},
        {"name": "clean", "type": "transform", "depends_on": ["read"],
         "config": {"op": "trim", "columns": ["name"]}},
        {"name": "save", "type": "export", "depends_on": ["clean"],
         "config": {"target": "file", "path": f"{path}.jsonl"}}]}  # fmt: skip


def _phone(browser: Browser, stack: Stack, token: str | None) -> Page:  # noqa: F811
    context = browser.new_context(base_url=f"http://127.0.0.1:{stack.port}", viewport=PHONE)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    if token:
        page.goto("/ui/login")
        page.fill("input[name=token]", token)
        page.click("#sign-in")
        expect(page.locator("header .principal")).to_be_visible()
    return page


def _run_of(page: Page) -> str:
    return re.search(r"/ui/runs/([0-9a-f-]{36})", page.url).group(1)


def _trigger(page: Page, pipeline_id: str) -> str:
    page.goto(f"/ui/pipelines/{pipeline_id}")
    page.click("button.trigger")
    expect(page).to_have_url(re.compile(r"/ui/runs/[0-9a-f-]{36}\?notice=created$"))
    return _run_of(page)


HOLD = "() => { document.body.dataset.paused = '1'; }"  # console.js: no refresh from now on
REFRESHED = "() => Number(document.body.dataset.refreshed || 0)"


def _problems(page: Page, path: str, *, status: str | None = None) -> list[str]:
    """What is wrong with `path` on a phone: overflow, an unreachable Sign out, axe. A run
    page is held still (no live refresh) while it is read; `status`: the run it shows must
    be in that state (the page being checked is the one meant)."""
    page.goto(path)
    return _problems_here(page, path, status=status)


def _problems_here(page: Page, where: str, *, status: str | None = None) -> list[str]:
    """`_problems` of the page as it is now (after a form's answer, say)."""
    expect(page.locator("main")).to_be_visible()
    page.evaluate(HOLD)
    refreshed = page.evaluate(REFRESHED)
    found = []
    if status is not None:
        shown = page.locator("h1 .badge").text_content()
        if shown != status:
            found.append(f"the run is {shown}, not {status}: its {status} page went unchecked")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    if width > PHONE["width"]:
        found.append(f"{width} px wide, past the edge: {page.evaluate(WIDE, PHONE['width'])}")
    sign_out = page.locator("form.signout button")
    if sign_out.count():
        box = sign_out.bounding_box()
        if box is None or box["x"] + box["width"] > PHONE["width"]:
            found.append(f"Sign out is off screen ({box})")
    found += axe_violations(page)
    if page.evaluate(REFRESHED) != refreshed:
        found.append("the live refresh rewrote the page while axe read it")
    return [f"{where}: {p}" for p in found]


def test_every_page_fits_a_phone_and_passes_axe_for_every_role(
    browser: Browser,  # noqa: F811
    stack: Stack,
) -> None:
    stack.start()
    slow = stack.create("slow", _plan("rows.csv"))
    quick = stack.create("quick_with_a_rather_long_pipeline_name_for_a_phone", _plan("few.csv"))
    operator = stack.etl("token", "create", "--role", "pipeline_operator", "--name", "op").strip()
    viewer = stack.etl("token", "create", "--role", "pipeline_viewer", "--name", "viewer").strip()
    # a webhook whose receiver is down: the pipeline page lists it and a failing delivery
    hook = stack.req("POST", f"/pipelines/{quick}/webhooks",
                     {"url": "http://127.0.0.1:9/hook", "events": ["run.succeeded"]})  # fmt: skip
    assert hook[0] == 201, hook
    admin = _phone(browser, stack, ADMIN_TOKEN)
    done = _trigger(admin, quick)
    expect(admin.locator("h1 .badge")).to_have_text("succeeded")
    assert stack.req("POST", f"/pipelines/{quick}/pause")[0] == 200  # its page says so
    running = _trigger(admin, slow)
    days = stack.create("days", {**_plan("few.csv"), "params": {"day": {"type": "date"}}})
    body = {"param": "day", "from": "2013-01-01", "to": "2013-01-03"}
    code, backfill = stack.req("POST", f"/pipelines/{days}/backfills", body)
    assert code == 201, backfill
    admin.goto(f"/ui/pipelines/{days}/backfills")  # the pages meant, not a 404's
    expect(admin.locator(f'tr[data-backfill="{backfill["id"]}"]')).to_be_visible()
    admin.goto(f"/ui/backfills/{backfill['id']}")
    expect(admin.locator("#backfill-progress progress")).to_be_visible()
    problems = []
    pages = ["/ui/", "/ui/runs", f"/ui/pipelines/{slow}", f"/ui/pipelines/{quick}",
             f"/ui/runs/{done}", f"/ui/runs/{uuid.uuid4()}",
             f"/ui/pipelines/{quick}?a=1&b=1", f"/ui/pipelines/{days}/backfills",
             f"/ui/backfills/{backfill['id']}"]  # fmt: skip
    admin_only = ["/ui/audit", "/ui/tokens", f"/ui/pipelines/{quick}/delete"]
    for token, extra in ((viewer, ["/ui/audit"]), (operator, []), (ADMIN_TOKEN, admin_only)):
        page = _phone(browser, stack, token)
        # the running run first, while it surely runs (asserted: `status`)
        problems += _problems(page, f"/ui/runs/{running}", status="running")
        for path in pages + extra:  # a viewer's /ui/audit is the 403 page
            problems += _problems(page, path)
    admin.goto(f"/ui/pipelines/{quick}")
    admin.click(".preview-form button[type=submit]")
    expect(admin).to_have_url(re.compile(r"/preview$"))
    problems += _problems_here(admin, "/preview")
    admin.goto("/ui/tokens")  # the answer to a new token: its secret, shown once
    admin.fill(".token-create input[name=name]", "a_token_with_a_long_name_for_a_small_phone")
    admin.click(".token-create button[type=submit]")
    expect(admin.locator("#issued-secret")).to_be_visible()
    problems += _problems_here(admin, "/ui/tokens (a new token's secret)")
    signed_out = _phone(browser, stack, None)
    problems += _problems(signed_out, "/ui/login")
    signed_out.fill("input[name=token]", "not-a-token-of-anyone")
    signed_out.click("#sign-in")
    expect(signed_out.locator("p.error")).to_be_visible()
    problems += _problems_here(signed_out, "/ui/login (a wrong token)")
    assert not problems, "\n".join(problems)


def test_the_live_refresh_keeps_focus_scroll_and_open_details(
    browser: Browser,  # noqa: F811
    stack: Stack,
) -> None:
    stack.start()
    slow = stack.create("slow", _plan("rows.csv"))
    page = _phone(browser, stack, ADMIN_TOKEN)
    _trigger(page, slow)
    save = page.locator('svg.dag g.node[data-step="save"]')
    expect(save).to_have_attribute("data-status", "running")
    read = page.locator('details[data-step="read"]')
    was_open = read.evaluate("d => d.open")
    read.locator("summary").click()  # the user's choice, whatever the server would say
    assert read.evaluate("d => d.open") is not was_open
    page.evaluate("() => window.scrollTo(0, 300)")
    page.locator("#cancel").focus()
    seen = int(page.evaluate("() => Number(document.body.dataset.refreshed || 0)"))
    page.wait_for_function(f"() => Number(document.body.dataset.refreshed || 0) >= {seen + 3}")
    assert page.evaluate("() => document.activeElement.id") == "cancel"
    assert page.evaluate("() => window.scrollY") == 300
    assert read.evaluate("d => d.open") is not was_open
    page.evaluate(HOLD)  # the documented hold: nothing changes until it is lifted
    held = page.evaluate(REFRESHED)
    page.wait_for_timeout(2500)
    assert page.evaluate(REFRESHED) == held
    page.evaluate("() => { delete document.body.dataset.paused; }")
    page.wait_for_function(f"() => Number(document.body.dataset.refreshed || 0) > {held}")
    page.keyboard.press("Enter")  # the focused Cancel button, by keyboard
    expect(page.locator("p.notice")).to_have_text(re.compile("Cancel requested"))
    expect(page.locator("h1 .badge")).to_have_text("canceled")
