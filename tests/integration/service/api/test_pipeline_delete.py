"""`DELETE /pipelines/{id}` on a real database (the in-process app): refused while runs are
queued or running, then 204; afterwards the pipeline is 404 everywhere and gone from the
lists, its schedules are deleted, its runs stay readable (and cannot be resumed), its name
is free, and the audit has the delete."""

from __future__ import annotations

import threading

import pytest

from service.domain.db import Database
from service.domain.pipelines import delete_pipeline
from service.domain.schedules import list_live_schedules
from service.errors import NotFound
from tests.integration.testapp import Api, plan_copy


def test_delete_is_refused_while_a_run_is_queued_or_running(api: Api) -> None:
    pid = api.create_pipeline("doomed")
    run_id = api.trigger(pid).body["id"]
    for status in ("queued", "running"):
        api.sql("UPDATE runs SET status = %s WHERE id = %s", (status, run_id))
        refused = api.call("DELETE", f"/pipelines/{pid}")
        assert (refused.status, refused.body["error"]["code"]) == (409, "pipeline_active")
        assert "doomed" in refused.body["error"]["message"]
        assert api.call("GET", f"/pipelines/{pid}").status == 200
    api.sql("UPDATE runs SET status = 'failed', finished_at = now() WHERE id = %s", (run_id,))
    assert api.call("DELETE", f"/pipelines/{pid}").status == 204


def test_after_a_delete_the_pipeline_is_gone_and_its_runs_stay(api: Api) -> None:
    pid = api.create_pipeline("reused")
    run_id = api.trigger(pid).body["id"]
    api.sql("UPDATE runs SET status = 'failed', finished_at = now() WHERE id = %s", (run_id,))
    schedule = api.call("POST", f"/pipelines/{pid}/schedules", {"every_minutes": 30}).body
    assert api.call("DELETE", f"/pipelines/{pid}").status == 204

    for method, path, body in [
        ("GET", f"/pipelines/{pid}", None),
        ("PATCH", f"/pipelines/{pid}", {"plan": plan_copy()}),
        ("POST", f"/pipelines/{pid}/runs", {}),
        ("POST", f"/pipelines/{pid}/pause", None),
        ("GET", f"/pipelines/{pid}/schedules", None),
        ("GET", f"/pipelines/{pid}/runs", None),
        ("DELETE", f"/pipelines/{pid}", None),
    ]:
        assert api.call(method, path, body).status == 404, (method, path)
    assert api.call("GET", "/pipelines?name=reused").body["items"] == []
    assert pid not in str(api.call("GET", "/pipelines").body)
    gone = api.sql("SELECT deleted_at IS NOT NULL FROM schedules WHERE id = %s", (schedule["id"],))
    assert gone == [(True,)]

    run = api.call("GET", f"/runs/{run_id}")
    assert run.status == 200 and run.body["pipeline_id"] == pid
    assert api.call("GET", f"/runs?pipeline_id={pid}").body["items"][0]["id"] == run_id
    assert api.call("GET", f"/pipelines/{pid}/revisions/1").status == 200  # runs refer to it
    resumed = api.call("POST", f"/runs/{run_id}/resume")
    assert (resumed.status, resumed.body["error"]["code"]) == (409, "pipeline_deleted")

    again = api.create_pipeline("reused")  # the name is free
    assert again != pid
    assert api.call("GET", "/pipelines?name=reused").body["items"][0]["id"] == again
    (entry,) = api.sql(
        "SELECT principal, entity_id, details FROM audit WHERE action = 'pipeline.delete'"
    )
    assert entry == (
        "pipeline_admin",
        pid,
        {"name": "reused", "schedules_deleted": 1, "webhooks_deleted": 0, "deliveries_canceled": 0},
    )


def test_a_live_name_stays_unique(api: Api) -> None:
    api.create_pipeline("taken")
    dup = api.call("POST", "/pipelines", {"name": "taken", "plan": plan_copy()})
    assert (dup.status, dup.body["error"]["code"]) == (409, "duplicate_name")


def test_a_trigger_racing_a_delete_either_makes_the_delete_refused_or_finds_no_pipeline(
    api: Api,
) -> None:
    """The delete holds the admission lock from its check of active runs to its COMMIT: a
    trigger waiting on it then finds no pipeline (404); never a queued run of a deleted
    pipeline."""
    pid = api.create_pipeline("raced")
    db = Database(api.db_url)
    try:
        with db.transaction() as cur:
            delete_pipeline(cur, pid, "test", request_id="race")
            answers: list[int] = []
            trigger = threading.Thread(target=lambda: answers.append(api.trigger(pid).status))
            trigger.start()
            trigger.join(0.5)
            assert trigger.is_alive()  # waits for the admission lock
        trigger.join(10)
        assert answers == [404]
        assert api.sql("SELECT count(*) FROM runs WHERE pipeline_id = %s", (pid,)) == [(0,)]
        with pytest.raises(NotFound), db.transaction() as cur:
            delete_pipeline(cur, pid, "test", request_id="again")
    finally:
        db.close()


def test_a_schedule_created_while_a_delete_is_in_flight_finds_no_pipeline(api: Api) -> None:
    """A new schedule locks the live pipeline row as the delete does: created during a
    delete it waits, then answers 404; no schedule outlives its pipeline."""
    pid = api.create_pipeline("raced")
    db = Database(api.db_url)
    try:
        with db.transaction() as cur:
            delete_pipeline(cur, pid, "test", request_id="race")
            answers: list[int] = []
            body = {"every_minutes": 30}
            path = f"/pipelines/{pid}/schedules"
            create = threading.Thread(
                target=lambda: answers.append(api.call("POST", path, body).status)
            )
            create.start()
            create.join(0.5)
            assert create.is_alive() and answers == []  # waits for the pipeline row
        create.join(10)
        assert answers == [404]
        assert api.sql("SELECT count(*) FROM schedules WHERE pipeline_id = %s", (pid,)) == [(0,)]
    finally:
        db.close()


def test_the_scheduler_never_loads_a_schedule_of_a_deleted_pipeline(api: Api) -> None:
    """An orphan (a live schedule of a deleted pipeline, as a race before the lock could
    leave) is not a job: its catch-up would find no pipeline."""
    kept, orphaned = api.create_pipeline("kept"), api.create_pipeline("orphaned")
    for pid in (kept, orphaned):
        assert api.call("POST", f"/pipelines/{pid}/schedules", {"every_minutes": 30}).status == 201
    api.sql("UPDATE pipelines SET deleted_at = now() WHERE id = %s", (orphaned,))
    db = Database(api.db_url)
    try:
        with db.transaction() as cur:
            assert [str(s["pipeline_id"]) for s in list_live_schedules(cur)] == [kept]
    finally:
        db.close()
