"""Bounded lists: every list endpoint answers `{"items", "next"}` keyset pages of summaries,
newest first; `limit` (default 50, at most 500) and `before` (an opaque cursor) are checked.
Rows are inserted in one transaction where the point is a tie in `created_at` (now() is the
transaction's start, so every row has the same timestamp)."""

from __future__ import annotations

import base64
import json
import urllib.parse
import uuid
from typing import Any

import psycopg2.extras
import pytest

from service.domain.listing import encode_cursor
from service.domain.principals import ADMIN, OPERATOR, VIEWER
from tests.integration.service.api.test_run_params import daily_plan
from tests.integration.testapp import PLAN, Api


def walk(api: Api, path: str, limit: int, role: str = ADMIN) -> list[dict[str, Any]]:
    """Every item of a list, page by page; checks each page's size and the last `next`."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    sep = "&" if "?" in path else "?"
    for _ in range(1000):
        url = f"{path}{sep}limit={limit}" + (f"&before={cursor}" if cursor else "")
        a = api.call("GET", url, role=role)
        assert a.status == 200, a.body
        assert set(a.body) == {"items", "next"}
        page, cursor = a.body["items"], a.body["next"]
        assert len(page) <= limit
        items.extend(page)
        if cursor is None:
            return items
        assert len(page) == limit  # a short page is the last one
    raise AssertionError("the walk does not end")


def insert_pipelines(api: Api, n: int) -> list[str]:
    """`n` pipelines created in one transaction (equal created_at)."""
    ids = [str(uuid.uuid4()) for _ in range(n)]
    plan = psycopg2.extras.Json(PLAN)
    api.sql(
        "WITH p AS (INSERT INTO pipelines (id, name, revision)"
        " SELECT id, 'tie-' || id, 1 FROM unnest(%s::uuid[]) AS id RETURNING id)"
        " INSERT INTO revisions (pipeline_id, number, plan, created_by)"
        " SELECT id, 1, %s, 'test' FROM p",
        (ids, plan),
    )
    return ids


def insert_runs(api: Api, pipeline_id: str, n: int, status: str = "succeeded") -> list[str]:
    """`n` runs of a pipeline created in one transaction (equal created_at)."""
    ids = [str(uuid.uuid4()) for _ in range(n)]
    api.sql(
        "INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id, created_by)"
        " SELECT id, %s, 1, %s, 'k-' || id, 't', 'test' FROM unnest(%s::uuid[]) AS id",
        (pipeline_id, status, ids),
    )
    return ids


def newest_first(api: Api, table: str, ids: list[str]) -> list[str]:
    rows = api.sql(
        f"SELECT id::text FROM {table} WHERE id = ANY(%s::uuid[])"
        " ORDER BY created_at DESC, id DESC",
        (ids,),
    )
    return [r[0] for r in rows]


def test_pipelines_walk_every_item_once_across_pages_with_tied_timestamps(api: Api) -> None:
    ids = insert_pipelines(api, 7)
    assert api.sql("SELECT count(DISTINCT created_at) FROM pipelines") == [(1,)]
    for limit in (1, 2, 3, 7, 500):
        got = [p["id"] for p in walk(api, "/pipelines", limit)]
        assert got == newest_first(api, "pipelines", ids), limit


def test_runs_walk_every_item_once_with_ties_and_new_arrivals(api: Api) -> None:
    pid = api.create_pipeline()
    other = api.create_pipeline()
    mine = insert_runs(api, pid, 5) + insert_runs(api, pid, 4, "failed")
    theirs = insert_runs(api, other, 3)
    expected = newest_first(api, "runs", mine)
    assert [r["id"] for r in walk(api, f"/pipelines/{pid}/runs", 2)] == expected
    assert [r["id"] for r in walk(api, f"/runs?pipeline_id={pid}", 4)] == expected
    everything = walk(api, "/runs", 5)
    assert sorted(r["id"] for r in everything) == sorted(mine + theirs)

    # A run that arrives during a walk sorts before the cursor: no item repeats or is lost.
    first = api.call("GET", "/runs?limit=5").body
    arrived = insert_runs(api, pid, 1)
    rest = walk(api, f"/runs?before={first['next']}", 5)
    seen = [r["id"] for r in first["items"] + rest]
    assert len(seen) == len(set(seen)) == len(mine + theirs)
    assert arrived[0] not in seen


def test_runs_filters_by_status_and_pipeline(api: Api) -> None:
    pid = api.create_pipeline()
    other = api.create_pipeline()
    ok = insert_runs(api, pid, 2)
    bad = insert_runs(api, pid, 3, "failed")
    elsewhere = insert_runs(api, other, 2, "failed")
    failed = api.call("GET", "/runs?status=failed").body["items"]
    assert sorted(r["id"] for r in failed) == sorted(bad + elsewhere)
    both = api.call("GET", f"/runs?status=failed,succeeded&pipeline_id={pid}").body["items"]
    assert sorted(r["id"] for r in both) == sorted(ok + bad)
    assert api.call("GET", f"/runs?status=queued&pipeline_id={pid}").body == {
        "items": [],
        "next": None,
    }
    assert api.call("GET", f"/pipelines/{pid}/runs?status=succeeded").body["items"][0]["id"] in ok


def test_revisions_schedules_and_audit_walk_newest_first(api: Api) -> None:
    pid = api.create_pipeline()
    for _ in range(4):
        assert api.call("PATCH", f"/pipelines/{pid}", {"plan": PLAN}).status == 200
    revisions = walk(api, f"/pipelines/{pid}/revisions", 2)
    assert [r["revision"] for r in revisions] == [5, 4, 3, 2, 1]
    assert all(set(r) == {"pipeline_id", "revision", "steps", "created_by", "created_at"}
               for r in revisions)  # fmt: skip
    assert {r["steps"] for r in revisions} == {3}

    ids = [str(uuid.uuid4()) for _ in range(5)]
    api.sql(
        "INSERT INTO schedules (id, pipeline_id, every_minutes, next_fire_at, created_by)"
        " SELECT id, %s, 60, now(), 'test' FROM unnest(%s::uuid[]) AS id",
        (pid, ids),
    )
    schedules = walk(api, f"/pipelines/{pid}/schedules", 2)
    assert [s["id"] for s in schedules] == newest_first(api, "schedules", ids)

    audit = walk(api, "/audit", 2)
    assert [r["id"] for r in audit] == [
        r[0] for r in api.sql("SELECT id FROM audit ORDER BY id DESC")
    ]
    assert len(audit) == 5  # the create and four updates
    updates = walk(api, f"/audit?action=pipeline.update&entity_id={pid}", 3)
    assert [r["details"]["revision"] for r in updates] == [5, 4, 3, 2]
    assert api.call("GET", "/audit?principal=nobody").body == {"items": [], "next": None}


def insert_backfills(api: Api, pipeline_id: str, n: int) -> list[str]:
    """`n` backfills of one pending `day` each, created in one transaction (equal
    created_at)."""
    ids = [str(uuid.uuid4()) for _ in range(n)]
    api.sql(
        "WITH b AS (INSERT INTO backfills (id, pipeline_id, param, value_from, value_to, total,"
        " created_by) SELECT id, %s, 'day', '\"2013-01-01\"', '\"2013-01-01\"', 1, 'test'"
        " FROM unnest(%s::uuid[]) AS id RETURNING id)"
        " INSERT INTO backfill_values (backfill_id, position, value)"
        " SELECT id, 0, '\"2013-01-01\"' FROM b",
        (pipeline_id, ids),
    )
    return ids


def test_backfills_walk_newest_first_with_ties_and_their_counters(api: Api) -> None:
    pid = api.create_pipeline(plan=daily_plan())
    other = api.create_pipeline(plan=daily_plan())
    body = {"param": "day", "from": "2013-01-01", "to": "2013-01-03"}
    made = api.call("POST", f"/pipelines/{pid}/backfills", body).body
    tied = insert_backfills(api, pid, 5)
    insert_backfills(api, other, 2)
    for limit in (1, 2, 6, 500):
        got = walk(api, f"/pipelines/{pid}/backfills", limit, role=VIEWER)
        assert [b["id"] for b in got] == newest_first(api, "backfills", [*tied, made["id"]])
    oldest = walk(api, f"/pipelines/{pid}/backfills", 500)[-1]
    assert oldest == {k: v for k, v in made.items() if k != "runs"}  # the view, no values
    assert (oldest["status"], oldest["total"], oldest["pending"]) == ("running", 3, 1)
    assert (oldest["from"], oldest["to"], oldest["schedule_id"]) == (
        "2013-01-01", "2013-01-03", None
    )  # fmt: skip
    api.call("POST", f"/backfills/{made['id']}/cancel")
    canceled = walk(api, f"/pipelines/{pid}/backfills", 500)[-1]
    assert (canceled["status"], canceled["pending"], canceled["failed"]) == ("canceled", 0, 2)
    missing = api.call("GET", f"/pipelines/{uuid.uuid4()}/backfills")
    assert missing.status == 404


def test_default_and_maximum_page_sizes(api: Api) -> None:
    pid = api.create_pipeline()
    insert_runs(api, pid, 501)
    default = api.call("GET", "/runs").body
    assert (len(default["items"]), default["next"] is not None) == (50, True)
    biggest = api.call("GET", f"/pipelines/{pid}/runs?limit=500").body
    assert (len(biggest["items"]), biggest["next"] is not None) == (500, True)
    last = api.call("GET", f"/runs?limit=500&before={biggest['next']}").body
    assert (len(last["items"]), last["next"]) == (1, None)


@pytest.mark.parametrize("limit", ["0", "501", "-1", "abc", "1.5", "", "١٢"])
def test_a_bad_limit_is_400_naming_it(api: Api, limit: str) -> None:
    pid = api.create_pipeline()
    for path in ("/pipelines", f"/pipelines/{pid}/runs", "/runs", "/audit"):
        a = api.call("GET", f"{path}?limit={limit}")
        assert a.status == 400, (path, limit)
        assert a.body["error"]["details"][0]["field"] == "limit"


def _b64(data: Any) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


BAD_CURSORS = [
    "not a cursor",
    "%%%",
    "abc",  # base64 of bytes that are not JSON
    _b64(b"\xff\xfe"),
    _b64({"kind": "runs"}),
    _b64(["runs"]),
    _b64(["runs", "2026-01-01T00:00:00+00:00"]),
    _b64(["runs", "yesterday", str(uuid.UUID(int=1))]),
    _b64(["runs", "2026-01-01T00:00:00", str(uuid.UUID(int=1))]),  # no time zone
    _b64(["runs", "2026-01-01T00:00:00+00:00", "not-a-uuid"]),
    _b64(["runs", 5, str(uuid.UUID(int=1))]),
    encode_cursor("audit", 7),  # another list's cursor
    "x" * 5000,
]


@pytest.mark.parametrize("cursor", BAD_CURSORS)
def test_a_malformed_cursor_is_400_naming_before(api: Api, cursor: str) -> None:
    pid = api.create_pipeline()
    for path in ("/runs", f"/pipelines/{pid}/runs"):
        a = api.call("GET", f"{path}?before={urllib.parse.quote(cursor)}")
        assert a.status == 400, cursor
        assert [d["field"] for d in a.body["error"]["details"]] == ["before"]


def test_the_audit_list_refuses_a_runs_cursor_and_bad_numbers(api: Api) -> None:
    pid = api.create_pipeline()
    insert_runs(api, pid, 3)
    runs_cursor = api.call("GET", "/runs?limit=1").body["next"]
    for path, cursor in (
        ("/audit", runs_cursor),
        ("/audit", encode_cursor("audit", "-3")),
        (f"/pipelines/{pid}/revisions", encode_cursor("revisions", "x")),
        ("/pipelines", runs_cursor),
        (
            f"/pipelines/{pid}/schedules",
            encode_cursor("pipelines", "2026-01-01T00:00:00+00:00", pid),
        ),
        (
            f"/pipelines/{pid}/backfills",
            encode_cursor("schedules", "2026-01-01T00:00:00+00:00", pid),
        ),
    ):
        a = api.call("GET", f"{path}?before={cursor}")
        assert (a.status, a.body["error"]["details"][0]["field"]) == (400, "before"), path


@pytest.mark.parametrize(
    ("query", "field"),
    [("status=bogus", "status"), ("status=", "status"), ("pipeline_id=12", "pipeline_id")],
)
def test_bad_run_filters_are_400_naming_them(api: Api, query: str, field: str) -> None:
    a = api.call("GET", f"/runs?{query}")
    assert (a.status, a.body["error"]["details"][0]["field"]) == (400, field)


def test_items_are_summaries(api: Api) -> None:
    pid = api.create_pipeline("summarised")
    queued = api.trigger(pid).body["id"]
    (done,) = insert_runs(api, pid, 1, "failed")
    api.sql(
        "INSERT INTO step_runs (run_id, name, type, position, status, records_out, rejected, error)"
        " VALUES (%(r)s, 'read', 'ingest', 0, 'succeeded', 10, 2, NULL),"
        "        (%(r)s, 'clean', 'transform', 1, 'failed', 0, 0, 'boom'),"
        "        (%(r)s, 'to_file', 'export', 2, 'upstream_failed', 0, 0, NULL)",
        {"r": done},
    )
    api.call("POST", f"/pipelines/{pid}/schedules", {"every_minutes": 30})
    (pipeline,) = api.call("GET", "/pipelines").body["items"]
    assert "plan" not in pipeline
    assert (pipeline["name"], pipeline["revision"], pipeline["steps"]) == ("summarised", 1, 3)
    assert pipeline["schedules"] == 1 and pipeline["next_fire_at"].endswith("Z")
    latest = newest_first(api, "runs", [queued, done])[0]
    assert pipeline["last_run"]["id"] == latest
    by_name = api.call("GET", "/pipelines?name=summarised").body["items"]
    assert [p["id"] for p in by_name] == [pid]
    assert api.call("GET", "/pipelines?name=other").body["items"] == []

    runs = {r["id"]: r for r in api.call("GET", f"/pipelines/{pid}/runs").body["items"]}
    assert "steps" in runs[done] and not isinstance(runs[done]["steps"], list)
    assert runs[done]["step_counts"] == {"succeeded": 1, "failed": 1, "upstream_failed": 1}
    assert (runs[done]["records_out"], runs[done]["rejected"]) == (10, 2)
    assert runs[done]["error"] == "step clean: boom"
    assert runs[done]["pipeline_name"] == "summarised"
    assert runs[queued]["step_counts"] == {"pending": 3}
    assert (runs[queued]["queue_position"], runs[queued]["steps"]) == (1, 3)


def test_every_role_reads_lists_and_only_admins_read_the_audit(api: Api) -> None:
    pid = api.create_pipeline()
    paths = ["/pipelines", "/runs", f"/pipelines/{pid}/runs", f"/pipelines/{pid}/revisions",
             f"/pipelines/{pid}/schedules", f"/pipelines/{pid}/backfills"]  # fmt: skip
    for role in (VIEWER, OPERATOR, ADMIN):
        for path in paths:
            assert api.call("GET", path, role=role).status == 200, (role, path)
        assert api.call("GET", "/audit", role=role).status == (200 if role == ADMIN else 403)
    for path in [*paths, "/audit"]:
        assert api.call("GET", path, role=None).status == 401, path
