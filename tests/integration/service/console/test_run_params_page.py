"""The console's run page shows a run's parameter values (not its `run_id`, shown above)."""

from __future__ import annotations

from service.domain.principals import ADMIN, VIEWER
from tests.integration.service.api.test_run_params import daily_plan
from tests.integration.service.console import test_pages

env = test_pages.env  # the fixture: a console on an in-process app
TOKENS = test_pages.TOKENS


def test_the_run_page_lists_the_values(env: test_pages.Env) -> None:
    pid = env.create("daily", daily_plan())
    r = env.api.simulate_post(
        f"/api/v1/pipelines/{pid}/runs",
        json={"params": {"day": "2026-12-01"}},
        headers={"Authorization": f"Bearer {TOKENS[ADMIN]}"},
    )
    assert r.status_code == 201, r.text
    page = env.browser(VIEWER).get(f"/ui/runs/{r.json['id']}")
    assert page.status_code == 200
    assert 'id="run-params">day=2026-12-01 · region=north</dd>' in page.text
