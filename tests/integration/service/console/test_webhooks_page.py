"""The pipeline page shows admins the pipeline's webhooks and their latest deliveries (status,
attempts, last error) in labelled, focusable tables; other roles see neither."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from service.domain.principals import ADMIN, OPERATOR, VIEWER
from tests.integration.service.webhook_receiver import end_run

from .test_pages import EVIL, TOKENS, Env


@pytest.fixture
def env(app_factory, db_url: str, tmp_path: Path):
    e = Env(app_factory, db_url, tmp_path)
    yield e
    e.db.close()


def test_admins_see_webhooks_and_deliveries_others_do_not(env: Env, db_url: str) -> None:
    pid = env.create("hooked")
    headers = {"Authorization": f"Bearer {TOKENS[ADMIN]}"}
    url = f"http://127.0.0.1:9/hook/{EVIL}"
    body = {"url": url, "events": ["run.failed", "run.succeeded"]}
    r = env.api.simulate_post(f"/api/v1/pipelines/{pid}/webhooks", json=body, headers=headers)
    assert r.status_code == 201, r.text
    secret = r.json["secret"]
    run = env.api.simulate_post(f"/api/v1/pipelines/{pid}/runs", json={}, headers=headers).json
    end_run(db_url, run["id"], "failed")
    env.sql(
        "UPDATE webhook_deliveries SET attempts = 3, last_status_code = 500,"
        " last_error = 'HTTP 500 Internal Server Error' WHERE run_id = %(r)s",
        {"r": run["id"]},
    )
    page = env.browser(ADMIN).get(f"/ui/pipelines/{pid}").text
    assert EVIL not in page and "&lt;script&gt;" in page  # the URL is text, escaped
    assert secret not in page
    hooks = re.search(r'<div class="table-scroll" tabindex="0" role="region"'
                      r' aria-label="Webhooks of this pipeline">\s*<table class="list webhooks">'
                      r"\s*<caption>", page)  # fmt: skip
    assert hooks, page
    (row,) = re.findall(r'<table class="list deliveries">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert "run.failed" in row and f"/ui/runs/{run['id']}" in row
    assert 'st-pending">pending' in row and "<td>3</td>" in row
    assert "HTTP 500 Internal Server Error" in row
    assert 'aria-label="Latest webhook deliveries"' in page
    for role in (OPERATOR, VIEWER):
        other = env.browser(role).get(f"/ui/pipelines/{pid}").text
        assert "webhooks" not in other.lower(), role
