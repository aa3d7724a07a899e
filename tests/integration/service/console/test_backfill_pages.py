"""The console's backfill pages through falcon's TestClient on a real database: a pipeline's
backfills with progress and the start form (operators), one backfill's values with their
runs and statuses, live while it runs, and its Cancel; the roles the API asks."""

from __future__ import annotations

import re

from service.domain.principals import ADMIN, OPERATOR, VIEWER
from tests.integration.service.api.test_run_params import daily_plan
from tests.integration.service.console import test_pages

env = test_pages.env  # the fixture: a console on an in-process app


def test_an_operator_starts_a_backfill_follows_its_values_and_cancels_it(
    env: test_pages.Env,
) -> None:
    pid = env.create("daily", daily_plan())
    viewer = env.browser(VIEWER)
    page = viewer.get(f"/ui/pipelines/{pid}/backfills")
    assert page.status_code == 200 and "No backfill yet." in page.text
    assert 'id="backfill-start"' not in page.text
    assert viewer.post(f"/ui/pipelines/{pid}/backfills", {}, csrf=viewer.csrf).status_code == 403

    operator = env.browser(OPERATOR)
    assert f'href="/ui/pipelines/{pid}/backfills"' in operator.get(f"/ui/pipelines/{pid}").text
    form = operator.get(f"/ui/pipelines/{pid}/backfills").text
    assert '<option value="day">day (date)</option>' in form
    assert 'value="region"' not in form  # a string parameter does not step
    started = operator.post(f"/ui/pipelines/{pid}/backfills",
                            {"param": "day", "from": "2013-01-01", "to": "2013-01-04"},
                            csrf=operator.csrf)  # fmt: skip
    assert started.status_code == 303, started.text
    found = re.search(r"/ui/backfills/([0-9a-f-]{36})\?notice=backfill_started$",
                      started.headers["location"])  # fmt: skip
    assert found
    backfill_id = found.group(1)
    assert len(env.woken) == 2  # two values admitted at once, their runs woken

    page = operator.get(f"/ui/backfills/{backfill_id}?notice=backfill_started").text
    assert "Backfill started" in page and "data-refresh-ms=" in page
    counts = "0 succeeded · 0 failed · 2 pending · 4 in all"
    assert f'<span id="backfill-counts">{counts}</span>' in page
    statuses = re.findall(r'<tr data-value="([^"]+)">.*?class="badge st-(\w+)"', page)
    assert statuses == [("2013-01-01", "queued"), ("2013-01-02", "queued"),
                        ("2013-01-03", "pending"), ("2013-01-04", "pending")]  # fmt: skip
    assert 'id="backfill-cancel"' in page
    assert 'id="backfill-cancel"' not in viewer.get(f"/ui/backfills/{backfill_id}").text
    listed = viewer.get(f"/ui/pipelines/{pid}/backfills").text
    assert f'<tr data-backfill="{backfill_id}">' in listed and "0/4" in listed

    canceled = operator.post(f"/ui/backfills/{backfill_id}/cancel", {}, csrf=operator.csrf)
    assert canceled.status_code == 303
    page = operator.get(f"/ui/backfills/{backfill_id}").text
    assert 'class="badge st-canceled">canceled' in page and "data-refresh-ms=" not in page
    assert 'id="backfill-cancel"' not in page
    again = operator.post(f"/ui/backfills/{backfill_id}/cancel", {}, csrf=operator.csrf)
    assert again.status_code == 409
    audit = env.sql("SELECT principal, action FROM audit WHERE entity_id = %(id)s ORDER BY id",
                    {"id": backfill_id})  # fmt: skip
    assert [(a["principal"], a["action"]) for a in audit] == [
        ("operator", "backfill.create"), ("operator", "backfill.cancel")
    ]  # fmt: skip


def test_a_bad_range_is_refused_naming_its_field(env: test_pages.Env) -> None:
    pid = env.create("daily", daily_plan())
    admin = env.browser(ADMIN)
    admin.get(f"/ui/pipelines/{pid}/backfills")
    bad = admin.post(f"/ui/pipelines/{pid}/backfills",
                     {"param": "day", "from": "2013-01-05", "to": "2013-01-01"},
                     csrf=admin.csrf)  # fmt: skip
    assert bad.status_code == 400 and "to:" in bad.text
    assert env.sql("SELECT count(*) AS n FROM backfills") == [{"n": 0}]
