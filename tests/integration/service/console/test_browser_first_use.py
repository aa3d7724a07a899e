"""What a new user meets in the console's first hour, in a real headless Chromium (Debian's)
against the real topology: a live run's timeline labels clear of the step names, DAG boxes
that lead to their step, a graph that fits the page, a trace id that links to the tracing
UI, a paused pipeline marked in the list, the new-token form on the least privilege, row
errors of a preview as JSON, and dark mode."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from drills import ADMIN_TOKEN, Stack
from service.console.graph import GANTT_LABEL_W
from tests.integration.service.console.test_browser import (
    CHROMIUM_ARGS,
    WAIT_MS,
    open_page,
    run_id_of,
    sign_in,
)
from tests.programs import program

TRACES = "http://127.0.0.1:16686/trace/{trace_id}"
# the `stack` fixture (tests/integration/conftest.py) reads these
STACK_ENV = {"ETL_FAULT": "slow_batches:step=out:ms=1500", "ETL_TRACE_URL": TRACES}
STACK_FILES = {
    "nums.csv": lambda: "id,text\n" + "".join(f"{i},line {i}\n" for i in range(1, 6001)),
    "bad.csv": "id,text\n1,a\nnot a number,b\n3,c,too many\n",
}
PLAN = {
    "on_row_error": "reject",
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "nums.csv", "columns": {"id": "int"}}},
        {"name": "clean", "type": "transform", "depends_on": ["read"],
         "config": {"op": "trim", "columns": ["text"]}},
        {"name": "out", "type": "export", "depends_on": ["clean"],
         "config": {"target": "file", "path": "nums.jsonl"}},
    ],
}  # fmt: skip
BAD = {"on_row_error": "reject", "steps": [
    {"name": "read", "type": "ingest",
     "config": {"source": "file", "path": "bad.csv", "columns": {"id": "int"}}}]}  # fmt: skip
LABELS = """svg => {
  const names = [...svg.querySelectorAll('text.step-label')].map(t => t.getBBox());
  const labels = [...svg.querySelectorAll('text.bar-label')].map(t => t.getBBox());
  return {names_right: Math.max(...names.map(b => b.x + b.width)),
          labels_left: Math.min(...labels.map(b => b.x)), labels: labels.length};
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=program("chromium"), args=CHROMIUM_ARGS)
        yield b
        b.close()


def batches_of_out(stack: Stack, run_id: str) -> int:
    rows = stack.sql(
        "SELECT batches_done FROM attempts WHERE run_id = %s AND step_name = 'out'"
        " AND outcome IS NULL AND executor IS NOT NULL",
        run_id,
    )
    return rows[0][0] if rows else 0


def test_a_live_run_page_its_timeline_graph_and_trace_link(browser: Browser, stack: Stack) -> None:
    stack.start()
    stack.create("nums", PLAN)
    page = open_page(browser, stack)
    sign_in(page, ADMIN_TOKEN)
    page.click("a.pipeline-link:text('nums')")
    page.click("button.trigger")
    expect(page).to_have_url(re.compile(r"/ui/runs/[0-9a-f-]{36}\?notice=created$"))
    run_id = run_id_of(page)
    stack.wait_for(lambda: batches_of_out(stack, run_id) >= 3, what="3 batches of out")
    out = page.locator('svg.dag g.node[data-step="out"]')
    expect(out).to_have_attribute("data-status", "running")
    # the live bar of `out` reaches the end of the axis: its label stays clear of the names
    page.evaluate("document.body.dataset.paused = '1'")  # hold the refresh while measuring
    geo = page.locator("svg.gantt").evaluate(LABELS)
    assert geo["labels"] == 3 and geo["names_right"] < GANTT_LABEL_W, geo
    assert geo["labels_left"] >= GANTT_LABEL_W, geo
    page.evaluate("delete document.body.dataset.paused")
    # a DAG box leads to its step's details, opened
    out.locator("a.step-link").click()
    expect(page).to_have_url(re.compile(r"#step-out$"))
    expect(page.locator("details#step-out")).to_have_attribute("open", "")
    # a wide graph fits the page's width on demand, and back
    wrap = page.locator(".dag-wrap").first
    page.click("button.dag-fit")
    svg_width = page.locator("svg.dag").evaluate("s => s.getBoundingClientRect().width")
    assert abs(svg_width - wrap.evaluate("w => w.clientWidth")) <= 1
    page.click("button.dag-fit")
    expect(page.locator("body[data-dag-fit]")).to_have_count(0)
    # the trace id links to the configured tracing UI
    trace_id = stack.run(run_id)["trace_id"]
    link = page.locator("#trace-id a")
    expect(link).to_have_text(trace_id)
    expect(link).to_have_attribute("href", TRACES.replace("{trace_id}", trace_id))


def test_paused_mark_token_form_preview_errors_and_dark_mode(
    browser: Browser, stack: Stack
) -> None:
    stack.start()
    held = stack.create("held", PLAN)
    stack.create("bad", BAD)
    assert stack.req("POST", f"/pipelines/{held}/pause")[0] == 200
    page = open_page(browser, stack)
    sign_in(page, ADMIN_TOKEN)
    expect(page.locator('tr[data-pipeline="held"] .paused-mark')).to_have_text("paused")
    expect(page.locator('tr[data-pipeline="bad"] .paused-mark')).to_have_count(0)
    page.goto("/ui/tokens")
    expect(page.locator("select[name=role]")).to_have_value("pipeline_viewer")
    page.goto("/ui/")
    page.click("a.pipeline-link:text('bad')")
    page.click("form.preview-form button[type=submit]")
    rows = page.locator('section.preview-step[data-step="read"] table.rejects tbody tr')
    expect(rows).to_have_count(2)
    texts = rows.all_inner_texts()
    assert all("None" not in t and "{'" not in t for t in texts), texts
    assert any('"id": "not a number"' in t for t in texts), texts
    dark = browser.new_context(
        base_url=f"http://127.0.0.1:{stack.port}", color_scheme="dark"
    ).new_page()
    dark.goto("/ui/login")
    assert dark.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(20, 23, 29)"
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(247, 248, 251)"
