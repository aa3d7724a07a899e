"""File-arrival schedules through the API and an in-process watcher on the test database:
the plan must declare a string `file` and the glob stay under ETL_DATA_DIR (400 naming
`watch`); files whose real path leaves the data directory are never recorded; a re-created
schedule re-triggers nothing; the listing shows the glob and the files waiting."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg2
import pytest

from service.watcher import Watcher
from tests.integration.testapp import Api

PLAN = {
    "params": {"file": {"type": "string"}},
    "steps": [
        {"name": "read", "type": "ingest", "config": {"source": "file", "path": "{file}"}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "out.jsonl"}},
    ],
}  # fmt: skip
NO_FILE = {**PLAN, "params": {"file": {"type": "date"}, "day": {"type": "string"}}}


def watcher(api: Api, data: Path) -> Watcher:
    """A watcher on the test database, settled at once, whose wake-ups join the API's."""
    connect = lambda: psycopg2.connect(api.db_url)  # noqa: E731
    return Watcher(connect, lambda r, t: api.wakes.append((r, t)), data, settle_s=0)


@pytest.mark.parametrize(
    ("plan", "body", "says"),
    [
        (NO_FILE, {"watch": "incoming/*.csv"}, "string parameter 'file'"),
        (PLAN, {"watch": "../outside/*.csv"}, "'..'"),
        (PLAN, {"watch": "/etc/*"}, "relative"),
        (PLAN, {"watch": ""}, "watch"),
        (PLAN, {"watch": "a/*.csv", "daily_at": "07:00"}, "not several"),
    ],
)
def test_a_watch_needs_a_string_file_parameter_and_a_glob_inside(
    api: Api, plan: dict, body: dict, says: str
) -> None:
    pid = api.create_pipeline(plan=plan)
    a = api.call("POST", f"/pipelines/{pid}/schedules", body)
    assert a.status == 400, a.body
    assert "watch" in {d["field"] for d in a.body["error"]["details"]}, a.body
    assert says in str(a.body), a.body
    assert api.sql("SELECT count(*) FROM schedules") == [(0,)]


def test_escaping_files_are_never_recorded_and_a_recreated_schedule_retriggers_nothing(
    api: Api, tmp_path: Path
) -> None:
    data, outside = tmp_path / "data", tmp_path / "outside"
    (data / "in").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.csv").write_text("a\n1\n")
    (data / "in" / "link.csv").symlink_to(outside / "secret.csv")  # leaves the data dir
    (data / "in" / "dir").symlink_to(outside, target_is_directory=True)
    (data / "in" / "good.csv").write_text("a\n1\n")
    (data / "in" / "star*.csv").write_text("a\n1\n")  # a glob character: no `file` value
    pid = api.create_pipeline(plan=PLAN)
    a = api.call("POST", f"/pipelines/{pid}/schedules", {"watch": "in/*.csv"})
    assert a.status == 201, a.body
    assert (a.body["watch"], a.body["next_fire_at"]) == ("in/*.csv", None)
    (data / "in" / "dir.csv").symlink_to(outside / "secret.csv")
    w = watcher(api, data)
    assert [w.poll_once(), w.poll_once()] == [0, 1]  # seen, then settled and admitted
    assert api.sql("SELECT path FROM watched_files") == [("in/good.csv",)]
    (run,) = api.sql("SELECT params->>'file', created_by, trigger_key FROM runs")
    assert run[:2] == ("in/good.csv", "watcher")
    assert run[2].startswith(f"watch:{a.body['id']}:")
    listed = api.call("GET", f"/pipelines/{pid}/schedules").body["items"]
    assert [(s["watch"], s["files_pending"], s["last_run_id"]) for s in listed] == [
        ("in/*.csv", 0, api.sql("SELECT id::text FROM runs")[0][0])
    ]
    assert api.call("DELETE", f"/pipelines/{pid}/schedules/{a.body['id']}").status == 204
    again = api.call("POST", f"/pipelines/{pid}/schedules", {"watch": "in/*.csv"})
    assert again.status == 201
    os.utime(data / "in" / "good.csv")  # touched, same content
    fresh = watcher(api, data)  # a restart: nothing in memory
    assert [fresh.poll_once(), fresh.poll_once(), w.poll_once()] == [0, 0, 0]
    assert api.sql("SELECT count(*) FROM runs") == [(1,)]
