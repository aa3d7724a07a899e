"""`make test` off this machine: the browser tests drive a Chromium found on a PATH in
another place, under another of its names (tests/programs.py), not /usr/bin/chromium."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.integration.service.console.test_browser import CHROMIUM_ARGS
from tests.programs import find_program, program


def test_a_chromium_elsewhere_on_the_path_runs_the_browser_tests(tmp_path: Path) -> None:
    elsewhere = tmp_path / "opt" / "browsers" / "google-chrome"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.symlink_to(program("chromium"))
    found = find_program("chromium", env={"PATH": str(elsewhere.parent)})
    assert found == str(elsewhere)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=found, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_content("<p id=said>found elsewhere</p>")
            assert page.inner_text("#said") == "found elsewhere"
        finally:
            browser.close()
