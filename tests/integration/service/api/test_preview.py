"""`POST /api/v1/pipelines/preview` on a real database through falcon's TestClient: a plan
or a saved revision, the roles of `POST /pipelines`, 400s with field paths, the ingest path
guard, a read-only table ingest, and nothing persisted but an audit row."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg2
import pytest

from actors.preview import read_only_connect
from service.config import Config
from service.domain.principals import ADMIN, OPERATOR, VIEWER
from tests.integration.testapp import Api, plan_copy

PEOPLE = "id,name,amount\n1,  Ann  ,5\n2,Bob,x\n3,Cy,7\n"
COUNTED = ("pipelines", "revisions", "runs", "step_runs", "step_batches")


@pytest.fixture
def api(app_factory, db_url: str, tmp_path: Path) -> Api:
    """The app with its data directory in tmp (people.csv) and the sandbox on the test
    database."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "people.csv").write_text(PEOPLE)
    config = Config(
        database_url=db_url,
        sandbox_url=db_url,
        data_dir=data,
        export_dir=tmp_path / "exports",
        reject_dir=tmp_path / "rejects",
    )
    return app_factory(config=config)


def _counts(api: Api) -> dict[str, int]:
    return {t: api.sql(f"SELECT count(*) FROM {t}")[0][0] for t in COUNTED}


def test_preview_of_a_plan_answers_every_step_and_persists_only_an_audit_row(
    api: Api, tmp_path: Path
) -> None:
    before = _counts(api)
    a = api.call("POST", "/pipelines/preview", {"plan": plan_copy(), "records": 2})
    assert a.status == 200, a.body
    assert a.body["ok"] is True and a.body["records"] == 2
    read, clean, out = a.body["steps"]
    assert (read["records_in"], read["records_out"], read["rejected"]) == (2, 1, 1)
    assert read["row_errors"][0]["reason"] == "not an int64: 'x'"
    assert clean["sample"] == [{"id": 1, "name": "Ann", "amount": 5}]
    assert out["export"]["target"] == "file" and out["export"]["rows"] == clean["sample"]
    assert _counts(api) == before
    assert not (tmp_path / "exports").exists()
    audit = api.sql("SELECT principal, action, entity_type, details FROM audit")
    assert audit == [(ADMIN, "pipeline.preview", "plan", {"records": 2, "ok": True})]


def test_the_name_of_a_pipeline_document_may_ride_along(api: Api) -> None:
    a = api.call("POST", "/pipelines/preview", {"name": "people", "plan": plan_copy()})
    assert a.status == 200 and a.body["records"] == 100


def test_preview_of_a_saved_pipeline_current_or_given_revision(api: Api) -> None:
    pid = api.create_pipeline(plan=plan_copy())
    changed = plan_copy()
    changed["steps"][1]["config"] = {"op": "filter_eq", "column": "name", "value": "nobody"}
    assert api.call("PATCH", f"/pipelines/{pid}", {"plan": changed}).status == 200
    current = api.call("POST", "/pipelines/preview", {"pipeline_id": pid})
    assert current.status == 200
    assert current.body["steps"][1]["warnings"][0]["code"] == "filter_kept_none"
    first = api.call("POST", "/pipelines/preview", {"pipeline_id": pid, "revision": 1})
    assert first.status == 200 and first.body["steps"][1]["warnings"] == []
    missing = api.call("POST", "/pipelines/preview", {"pipeline_id": pid, "revision": 9})
    assert missing.status == 404
    unknown = api.call("POST", "/pipelines/preview", {"pipeline_id": str(uuid.uuid4())})
    assert unknown.status == 404
    audit = api.sql("SELECT entity_id, details FROM audit WHERE action = 'pipeline.preview'")
    assert audit == [(pid, {"records": 100, "ok": True, "revision": 2}),
                     (pid, {"records": 100, "ok": True, "revision": 1})]  # fmt: skip


def test_roles_are_those_of_creating_a_pipeline(api: Api) -> None:
    for role in (OPERATOR, VIEWER):
        assert (
            api.call("POST", "/pipelines/preview", {"plan": plan_copy()}, role=role).status == 403
        )
    assert api.call("POST", "/pipelines/preview", {"plan": plan_copy()}, role=None).status == 401


def test_an_invalid_plan_or_body_is_400_with_field_paths(api: Api) -> None:
    plan = plan_copy()
    plan["steps"][2]["depends_on"] = ["nope"]
    a = api.call("POST", "/pipelines/preview", {"plan": plan})
    assert a.status == 400 and a.body["error"]["code"] == "invalid_plan"
    assert a.body["error"]["details"][0]["field"] == "plan.steps[2].depends_on[0]"
    for body, field in (
        ({"plan": plan_copy(), "records": 5001}, "records"),
        ({"plan": plan_copy(), "records": "7"}, "records"),
        ({}, "plan"),
        ({"plan": plan_copy(), "pipeline_id": str(uuid.uuid4())}, "plan"),
        ({"plan": plan_copy(), "revision": 1}, "revision"),
        ({"plan": plan_copy(), "extra": 1}, "extra"),
    ):
        a = api.call("POST", "/pipelines/preview", body)
        assert a.status == 400, body
        assert field in [d["field"] for d in a.body["error"]["details"]], (body, a.body)
    assert api.sql("SELECT count(*) FROM audit")[0][0] == 0


def test_the_ingest_path_guard_applies(api: Api, tmp_path: Path) -> None:
    (tmp_path / "outside.csv").write_text("id\n1\n")
    (tmp_path / "data" / "link.csv").symlink_to(tmp_path / "outside.csv")
    plan = plan_copy()
    plan["steps"][0]["config"]["path"] = "link.csv"
    a = api.call("POST", "/pipelines/preview", {"plan": plan})
    assert a.status == 200 and a.body["ok"] is False
    assert a.body["steps"][0]["error"] == (
        "SourceRefused: source path 'link.csv' leaves the data directory"
    )
    assert [s["status"] for s in a.body["steps"]] == [
        "failed",
        "upstream_failed",
        "upstream_failed",
    ]


def test_a_table_ingest_reads_the_sandbox_read_only(api: Api) -> None:
    api.sql("CREATE TABLE sandbox.src (id bigint PRIMARY KEY, name text)")
    api.sql("INSERT INTO sandbox.src SELECT g, 'n' || g FROM generate_series(1, 700) g")
    plan = {
        "steps": [
            {"name": "read", "type": "ingest", "config": {"source": "table", "table": "src"}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "table", "table": "copy", "key": "id"}},
        ]
    }  # fmt: skip
    a = api.call("POST", "/pipelines/preview", {"plan": plan, "records": 600})
    assert a.status == 200, a.body
    read, out = a.body["steps"]
    assert read["source"]["read_only"] is True
    assert read["columns"] == {"id": "int", "name": "string"} and read["records_out"] == 600
    assert out["export"]["table"] == "sandbox.copy" and out["records_out"] == 600
    assert api.sql("SELECT to_regclass('sandbox.copy')") == [(None,)]  # nothing written


def test_the_preview_connection_cannot_write(api: Api) -> None:
    """What makes the table ingest read-only: the session the preview opens."""
    conn = read_only_connect(lambda: psycopg2.connect(api.db_url))()
    try:
        with pytest.raises(psycopg2.errors.ReadOnlySqlTransaction), conn.cursor() as cur:
            cur.execute("CREATE TABLE sandbox.nope (id int)")
    finally:
        conn.close()
