"""The console's runs page searched by the days runs were created (`from`, `to`: UTC dates,
both included), with the other filters and across pages."""

from __future__ import annotations

import re

from service.domain.principals import VIEWER
from tests.integration.service.console import test_pages

env = test_pages.env  # the fixture: a console on this test's database


def test_runs_are_searched_by_the_days_they_were_created(env: test_pages.Env) -> None:
    pid = env.create("daily")
    for key, at in (
        ("jan-31", "2026-01-31T23:59:59Z"),
        ("feb-01", "2026-02-01T00:00:00Z"),
        ("feb-02", "2026-02-02T12:00:00Z"),
        ("feb-03", "2026-02-03T00:00:00Z"),
    ):
        env.sql(
            "INSERT INTO runs (id, pipeline_id, revision, status, reason, trigger_key, trace_id,"
            " created_by, created_at) VALUES (gen_random_uuid(), %(p)s, 1, 'skipped', 'busy',"
            " %(k)s, 't', 'test', %(at)s)",
            {"p": pid, "k": key, "at": at},
        )  # fmt: skip
    viewer = env.browser(VIEWER)

    def keys(query: str) -> list[str]:
        page = viewer.get(f"/ui/runs?{query}")
        assert page.status_code == 200, page.text
        return re.findall(r'<td class="mono">(jan-31|feb-0\d)</td>', page.text)

    assert keys("from=2026-02-01&to=2026-02-02") == ["feb-02", "feb-01"]
    assert keys("from=2026-02-02") == ["feb-03", "feb-02"]
    assert keys("to=2026-01-31") == ["jan-31"]
    assert keys("from=2026-02-01&to=2026-02-01&status=skipped&pipeline=daily") == ["feb-01"]
    form = viewer.get("/ui/runs?from=2026-02-01").text
    assert 'type="date" name="from" value="2026-02-01"' in form
    bad = viewer.get("/ui/runs?from=yesterday")
    assert bad.status_code == 400 and "YYYY-MM-DD" in bad.text
