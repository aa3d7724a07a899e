"""The pipeline page lists the cursor marks of its incremental table ingests; an admin sets
or resets one there (audited, as through the API); other roles only see them."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.domain.principals import ADMIN, VIEWER

from .test_pages import Env

PLAN = {
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "table", "table": "src", "cursor": "ts"}},
    ]
}  # fmt: skip


@pytest.fixture
def env(app_factory, db_url: str, tmp_path: Path):
    e = Env(app_factory, db_url, tmp_path)
    yield e
    e.db.close()


def test_an_admin_sets_and_resets_a_mark_from_the_pipeline_page(env: Env) -> None:
    pid = env.create("incremental", PLAN)
    admin = env.browser(ADMIN)
    page = admin.get(f"/ui/pipelines/{pid}").text
    assert 'aria-label="Cursor marks"' in page and "src.ts" in page
    assert "none: the next run reads from the start" in page
    r = admin.post(
        f"/ui/pipelines/{pid}/cursors/set",
        {"step": "read", "value": "2024-05-01 00:00:00+00"},
        csrf=admin.csrf,
    )
    assert r.status_code == 303 and r.headers["location"].endswith("notice=cursor_set")
    page = admin.get(f"/ui/pipelines/{pid}").text
    assert "2024-05-01 00:00:00+00" in page
    viewer = env.browser(VIEWER)
    seen = viewer.get(f"/ui/pipelines/{pid}").text
    assert "2024-05-01 00:00:00+00" in seen and "/cursors/reset" not in seen
    reset = f"/ui/pipelines/{pid}/cursors/reset"
    assert viewer.post(reset, {"step": "read"}, csrf=viewer.csrf).status_code == 403
    r = admin.post(f"/ui/pipelines/{pid}/cursors/reset", {"step": "read"}, csrf=admin.csrf)
    assert r.status_code == 303
    assert "none: the next run reads from the start" in admin.get(f"/ui/pipelines/{pid}").text
    audit = env.sql(
        "SELECT action, details->>'step' AS step FROM audit WHERE left(action, 7) = 'cursor.'"
        " ORDER BY id"
    )
    assert [(a["action"], a["step"]) for a in audit] == [
        ("cursor.set", "read"), ("cursor.reset", "read")
    ]  # fmt: skip
    bad = admin.post(f"/ui/pipelines/{pid}/cursors/set", {"step": "nope", "value": "1"},
                     csrf=admin.csrf)  # fmt: skip
    assert bad.status_code == 404
