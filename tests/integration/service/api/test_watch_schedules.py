"""File-arrival schedules through the API and an in-process watcher on the test database:
the plan must declare a string `file` and the glob stay under ETL_DATA_DIR (400 naming
`watch`); files whose real path leaves the data directory are never recorded; a re-created
schedule re-triggers nothing; the listing shows the glob and the files waiting; watched
files and backfills share two of a pipeline's slots, leaving two to triggers."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg2

from service.backfiller import Backfiller
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


REFUSED = [
    (NO_FILE, {"watch": "incoming/*.csv"}, "string parameter 'file'"),
    (PLAN, {"watch": "../outside/*.csv"}, "'..'"),
    (PLAN, {"watch": "/etc/*"}, "relative"),
    (PLAN, {"watch": ""}, "watch"),
    (PLAN, {"watch": "a/*.csv", "daily_at": "07:00"}, "not several"),
]


def test_a_watch_needs_a_string_file_parameter_and_a_glob_inside(api: Api) -> None:
    pids = {id(p): api.create_pipeline(plan=p) for p in (PLAN, NO_FILE)}
    for plan, body, says in REFUSED:
        a = api.call("POST", f"/pipelines/{pids[id(plan)]}/schedules", body)
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


def test_watched_files_and_a_backfill_share_two_slots_and_triggers_keep_theirs(
    api: Api, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    (data / "in").mkdir(parents=True)
    for name in ("a.csv", "b.csv", "c.csv"):
        (data / "in" / name).write_text("a\n1\n")
    plan = {**PLAN, "params": {**PLAN["params"], "n": {"type": "int", "default": 0}}}
    plan["params"]["file"] = {"type": "string", "default": "in/a.csv"}
    pid = api.create_pipeline(plan=plan)
    assert api.call("POST", f"/pipelines/{pid}/schedules", {"watch": "in/*.csv"}).status == 201
    w = watcher(api, data)
    assert [w.poll_once(), w.poll_once()] == [0, 2]  # two of the three files
    b = api.call("POST", f"/pipelines/{pid}/backfills", {"param": "n", "from": 1, "to": 3})
    assert (b.status, b.body["pending"]) == (201, 3)  # no slot left for the backfill
    manual = [api.call("POST", f"/pipelines/{pid}/runs", {}) for _ in range(3)]
    assert [m.status for m in manual] == [201, 201, 429]  # the two other slots
    api.sql("UPDATE runs SET status = 'succeeded', finished_at = now() WHERE status = 'queued'")
    assert api.sql("SELECT count(*) FROM watched_files WHERE admitted_at IS NULL") == [(1,)]
    assert w.poll_once() == 1  # the last file, then one slot for the backfill
    filler = Backfiller(lambda: psycopg2.connect(api.db_url), lambda r, t: None)
    assert (filler.admit_once(), filler.admit_once()) == (1, 0)
    assert api.call("GET", f"/backfills/{b.body['id']}").body["pending"] == 2
    keys = api.sql("SELECT trigger_key FROM runs WHERE status = 'queued' ORDER BY queue_seq")
    assert [k.split(":")[0] for (k,) in keys] == ["watch", "backfill"]
