"""The DAG as Chromium draws it, read back from the SVG on awkward plans: two ingests
feeding a chain, diamonds, thirty steps, long names. On the pipeline page, the preview panel
and the run page, every dependency is a visible path and none runs through a box."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from drills import ADMIN_TOKEN, Stack

from .browsing import assert_dag_readable
from .test_browser import browser, open_page, sign_in  # noqa: F401 (the fixture)

STACK_FILES = {"in.csv": "id,name\n1, ada \n2,bob\n"}


def _ingest(name: str) -> dict:
    return {"name": name, "type": "ingest",
            "config": {"source": "file", "path": "in.csv", "columns": {"id": "int"}}}  # fmt: skip


def _transform(name: str, *deps: str) -> dict:
    return {"name": name, "type": "transform", "depends_on": list(deps),
            "config": {"op": "trim", "columns": ["name"]}}  # fmt: skip


def _export(name: str, *deps: str) -> dict:
    return {"name": name, "type": "export", "depends_on": list(deps),
            "config": {"target": "file", "path": f"{name}.jsonl"}}  # fmt: skip


TWO_INGESTS = {"steps": [
    _ingest("read_csv"), _ingest("read_api"), _transform("clean", "read_csv"),
    _transform("enrich", "clean"), _transform("join", "enrich", "read_api"),
    _transform("both", "read_csv", "join"), _export("out", "both")]}  # fmt: skip
DIAMONDS = {"steps": [
    _ingest("a"), _transform("b", "a"), _transform("c", "a"), _transform("d", "b", "c"),
    _transform("e", "d"), _transform("f", "d"), _transform("g", "e", "f", "a"),
    _transform("h", "g", "c"), _export("z", "h", "b")]}  # fmt: skip
THIRTY = {"steps": [
    _ingest("src_one"), _ingest("src_two"),
    *(_transform(f"t{i:02d}", "src_one" if i % 3 else "src_two") for i in range(12)),
    *(_transform(f"u{i:02d}", f"t{i:02d}", f"t{(i + 5) % 12:02d}") for i in range(10)),
    _transform("merge", *(f"u{i:02d}" for i in range(0, 10, 2)), "src_two"),
    *(_export(f"out{i}", "merge" if i % 2 else f"u{i:02d}") for i in range(4)),
    _export("last", "merge", "t00")]}  # fmt: skip
PREFIX = "normalise_the_customer_addresses_of_the_region_"
LONG_NAMES = {"steps": [
    _ingest(f"{PREFIX}read"), _transform(f"{PREFIX}north", f"{PREFIX}read"),
    _transform(f"{PREFIX}south", f"{PREFIX}read"),
    _transform(f"{PREFIX}merge", f"{PREFIX}north", f"{PREFIX}south", f"{PREFIX}read"),
    _export(f"{PREFIX}save", f"{PREFIX}merge")]}  # fmt: skip
# Drawings broken on purpose (the first edge of the drawn graph rewritten in the browser) and
# what `assert_dag_readable` must then say: an edge still painted and crossing no box, yet
# detached from its boxes or partly off the canvas (clipped).
DOCTOR = """(svg, kind) => {
  const p = svg.querySelector('path.edge'), d = p.getAttribute('d');
  const a = p.getPointAtLength(0), b = p.getPointAtLength(p.getTotalLength());
  const rest = d.replace(/^M[^A-Za-z]*/, ''), below = svg.viewBox.baseVal.height + 30;
  p.setAttribute('d', {detached_start: `M${a.x + 25},${a.y} ${rest}`,
                       start_off_the_side: `M${a.x},${a.y - 40} ${rest}`,
                       detached_end: `${d} l-25,0`,
                       off_the_canvas: `M${a.x},${a.y} V${below} H${b.x} V${b.y}`}[kind]);
}"""
DOCTORED = {
    "detached_start": "starts at .*, not on the right side of",
    "start_off_the_side": "starts at .*, not on the right side of",
    "detached_end": "ends at .*, not on the left side of",
    "off_the_canvas": "leaves the canvas",
}
PLANS = {"two_ingests": TWO_INGESTS, "diamonds": DIAMONDS, "thirty": THIRTY,
         "long_names": LONG_NAMES}  # fmt: skip


def test_awkward_plans_are_drawn_readably_on_every_page(browser: Browser, stack: Stack) -> None:  # noqa: F811
    assert len(THIRTY["steps"]) == 30
    stack.start()
    ids = {name: stack.create(name, plan) for name, plan in PLANS.items()}
    page = open_page(browser, stack)
    sign_in(page, ADMIN_TOKEN)
    for name, plan in PLANS.items():
        page.goto(f"/ui/pipelines/{ids[name]}")
        assert_dag_readable(page, plan, f"pipeline page of {name}")
        labels = page.locator("svg.dag text.name").all_text_contents()
        assert len(set(labels)) == len(plan["steps"]), labels  # no two boxes read the same
        page.click(".preview-form button[type=submit]")
        expect(page).to_have_url(re.compile(r"/preview$"))
        assert_dag_readable(page, plan, f"preview panel of {name}")
    page.goto(f"/ui/pipelines/{ids['two_ingests']}")
    page.click("button.trigger")
    expect(page.locator("h1 .badge")).to_have_text("succeeded")
    assert page.locator("svg.dag g.node[data-status=succeeded]").count() == 7
    assert_dag_readable(page, TWO_INGESTS, "run page of two_ingests")
    for kind, problem in DOCTORED.items():  # the checks above catch a broken drawing
        page.reload()
        page.locator("svg.dag").evaluate(DOCTOR, kind)
        with pytest.raises(AssertionError, match=problem):
            assert_dag_readable(page, TWO_INGESTS, f"run page, {kind}")
