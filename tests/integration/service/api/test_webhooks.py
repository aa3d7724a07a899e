"""Webhooks over the API (admins only): create (the secret shown once), list (never the
secret), delete, validation naming the field; and the outbox the database fills when a run
ends: one delivery per webhook asking for the event, written by the transaction that ends
the run, with the run summary as `GET /runs` lists it."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from dag import PIPELINE_ACTIVE_LIMIT
from service.domain.db import Database
from service.domain.pipelines import delete_pipeline
from service.domain.principals import OPERATOR, VIEWER
from tests.integration.service.webhook_receiver import end_run
from tests.integration.testapp import Api

URL = "http://127.0.0.1:9/hook"
ALL = ["run.failed", "run.succeeded", "run.skipped"]

BAD_BODIES = [
    ({"events": ALL}, "url"),
    ({"url": "ftp://127.0.0.1/x", "events": ALL}, "url"),
    ({"url": "127.0.0.1:8080/x", "events": ALL}, "url"),
    ({"url": "http://", "events": ALL}, "url"),
    ({"url": "http:///path", "events": ALL}, "url"),
    ({"url": "http://user:pw@127.0.0.1/x", "events": ALL}, "url"),
    ({"url": "http://127.0.0.1:0/x", "events": ALL}, "url"),
    ({"url": "http://127.0.0.1:65536/x", "events": ALL}, "url"),
    ({"url": "http://127.0.0.1/a b", "events": ALL}, "url"),
    ({"url": "http://127.0.0.1/x\n", "events": ALL}, "url"),
    ({"url": "http://::1/x", "events": ALL}, "url"),
    ({"url": "http://[::1%25lo]/x", "events": ALL}, "url"),
    ({"url": "http://[1::2::3]/x", "events": ALL}, "url"),
    ({"url": "http://127.0.0.1/" + "x" * 2048, "events": ALL}, "url"),
    ({"url": 5, "events": ALL}, "url"),
    ({"url": URL}, "events"),
    ({"url": URL, "events": []}, "events"),
    ({"url": URL, "events": ["run.canceled"]}, "events[0]"),
    ({"url": URL, "events": "run.failed"}, "events"),
    ({"url": URL, "events": ALL, "secret": "short"}, "secret"),
    ({"url": URL, "events": ALL, "secret": "s" * 257}, "secret"),
    ({"url": URL, "events": ALL, "extra": 1}, "extra"),
]


def hooks(api: Api, pid: str) -> list[dict]:
    a = api.call("GET", f"/pipelines/{pid}/webhooks")
    assert a.status == 200, a.body
    return a.body["items"]


def deliveries(api: Api, run_id: str) -> list[tuple]:
    return api.sql(
        "SELECT webhook_id::text, event, status, run, event_id FROM webhook_deliveries"
        " WHERE run_id = %s ORDER BY id",
        (run_id,),
    )


def test_create_list_delete_and_the_secret_shown_once(api: Api) -> None:
    pid = api.create_pipeline()
    given = api.call(
        "POST",
        f"/pipelines/{pid}/webhooks",
        {"url": URL, "events": ["run.failed", "run.failed"], "secret": "s3cret-0123456789"},
    )
    assert given.status == 201, given.body
    assert given.body["secret"] == "s3cret-0123456789"
    assert given.body["events"] == ["run.failed"]  # asked twice, sent once
    assert given.headers["location"].endswith(f"/webhooks/{given.body['id']}")
    assert given.headers["cache-control"] == "no-store"  # it shows the secret
    generated = api.call("POST", f"/pipelines/{pid}/webhooks", {"url": URL, "events": ALL})
    assert generated.status == 201
    assert len(generated.body["secret"]) >= 40  # 32 random bytes, URL-safe base64
    assert generated.body["secret"] != given.body["secret"]
    listed = hooks(api, pid)
    assert [h["id"] for h in listed] == [generated.body["id"], given.body["id"]]
    assert all("secret" not in h for h in listed)
    assert "s3cret" not in json.dumps(listed)
    assert listed[0]["events"] == ALL and listed[0]["last_delivery"] is None
    gone = api.call("DELETE", f"/pipelines/{pid}/webhooks/{given.body['id']}")
    assert gone.status == 204
    assert [h["id"] for h in hooks(api, pid)] == [generated.body["id"]]
    again = api.call("DELETE", f"/pipelines/{pid}/webhooks/{given.body['id']}")
    assert again.status == 404
    audit = api.sql(
        "SELECT action, entity_id, details->>'url' FROM audit WHERE entity_type = 'webhook'"
        " ORDER BY id"
    )
    assert audit == [
        ("webhook.create", given.body["id"], URL),
        ("webhook.create", generated.body["id"], URL),
        ("webhook.delete", given.body["id"], URL),
    ]
    assert "s3cret" not in json.dumps(api.sql("SELECT details FROM audit"))


def test_the_created_answer_is_declared_no_store(api: Api) -> None:
    doc = api.call("GET", "/openapi.json", role=None).body
    path = doc["paths"]["/api/v1/pipelines/{pipeline_id}/webhooks"]
    headers = path["post"]["responses"]["201"]["headers"]
    assert headers["Cache-Control"]["schema"] == {"type": "string", "const": "no-store"}
    assert "headers" not in path["get"]["responses"]["200"]


def test_invalid_bodies_are_400_naming_the_field(api: Api) -> None:
    pid = api.create_pipeline()
    for body, field in BAD_BODIES:
        a = api.call("POST", f"/pipelines/{pid}/webhooks", body)
        assert a.status == 400, (body, a.body)
        assert field in {d["field"] for d in a.body["error"]["details"]}, (body, a.body)
    assert api.sql("SELECT count(*) FROM webhooks") == [(0,)]
    for url in (
        "https://hooks.example.com:8443/etl?team=data#x",
        "http://localhost/",
        URL,
        "http://[::1]:8080/hook",
        "https://[2001:db8::1]/x",
    ):
        a = api.call("POST", f"/pipelines/{pid}/webhooks", {"url": url, "events": ALL})
        assert a.status == 201, (url, a.body)


def test_roles_unknown_pipeline_and_the_cap(api: Api) -> None:
    pid = api.create_pipeline()
    body = {"url": URL, "events": ALL}
    for role in (OPERATOR, VIEWER):
        assert api.call("POST", f"/pipelines/{pid}/webhooks", body, role=role).status == 403
        assert api.call("GET", f"/pipelines/{pid}/webhooks", role=role).status == 403
    assert api.call("POST", f"/pipelines/{pid}/webhooks", body, role=None).status == 401
    nowhere = str(uuid.uuid4())
    assert api.call("POST", f"/pipelines/{nowhere}/webhooks", body).status == 404
    assert api.call("GET", f"/pipelines/{nowhere}/webhooks").status == 404
    assert api.call("DELETE", f"/pipelines/{pid}/webhooks/{nowhere}").status == 404
    for _ in range(20):
        assert api.call("POST", f"/pipelines/{pid}/webhooks", body).status == 201
    refused = api.call("POST", f"/pipelines/{pid}/webhooks", body)
    assert refused.status == 409 and "20 webhooks" in refused.body["error"]["message"]
    first = api.call("GET", f"/pipelines/{pid}/webhooks?limit=15")
    rest = api.call("GET", f"/pipelines/{pid}/webhooks?limit=15&before={first.body['next']}")
    assert len(first.body["items"]) == 15 and len(rest.body["items"]) == 5
    assert rest.body["next"] is None


@pytest.mark.parametrize("status", ["succeeded", "failed"])
def test_a_run_ending_queues_one_delivery_per_webhook_asking_for_its_event(
    api: Api, status: str
) -> None:
    pid = api.create_pipeline()
    wanted = {}
    for events in (ALL, [f"run.{status}"], ["run.skipped"]):
        a = api.call("POST", f"/pipelines/{pid}/webhooks", {"url": URL, "events": events})
        wanted[a.body["id"]] = f"run.{status}" in events
    other = api.create_pipeline()  # its webhook hears nothing of this pipeline's runs
    api.call("POST", f"/pipelines/{other}/webhooks", {"url": URL, "events": ALL})
    run_id = api.trigger(pid).body["id"]
    assert deliveries(api, run_id) == []  # queued: no event
    end_run(api.db_url, run_id, status)
    rows = deliveries(api, run_id)
    assert sorted(r[0] for r in rows) == sorted(h for h, want in wanted.items() if want)
    assert {r[1] for r in rows} == {f"run.{status}"}
    assert {r[2] for r in rows} == {"pending"}
    assert len({r[4] for r in rows}) == len(rows)  # an event id per delivery
    listed = api.call("GET", f"/runs?pipeline_id={pid}").body["items"][0]
    for row in rows:
        assert row[3] == listed  # the summary GET /runs shows, as the run ended
    assert listed["records_out"] == 12 and listed["rejected"] == 2
    if status == "failed":
        assert listed["error"] == "step read: boom"
    api.sql("UPDATE runs SET status = 'queued' WHERE id = %s", (run_id,))  # a resume
    assert len(deliveries(api, run_id)) == len(rows)


def test_a_skipped_trigger_queues_run_skipped_and_a_cancel_nothing(api: Api) -> None:
    pid = api.create_pipeline()
    hook = api.call("POST", f"/pipelines/{pid}/webhooks", {"url": URL, "events": ALL}).body
    runs = [api.trigger(pid, f"k{i}") for i in range(PIPELINE_ACTIVE_LIMIT + 1)]
    assert [a.status for a in runs] == [201] * PIPELINE_ACTIVE_LIMIT + [429]
    skipped = runs[-1].body["id"]
    rows = deliveries(api, skipped)
    assert [(r[0], r[1]) for r in rows] == [(hook["id"], "run.skipped")]
    listed = api.call("GET", f"/runs?pipeline_id={pid}&status=skipped").body["items"][0]
    assert rows[0][3] == listed
    assert listed["reason"] == "queue_full" and listed["step_counts"] == {"not_run": 3}
    canceled = api.call("POST", f"/runs/{runs[0].body['id']}/cancel")
    assert canceled.status == 202
    assert deliveries(api, runs[0].body["id"]) == []
    assert hooks(api, pid)[0]["last_delivery"]["event"] == "run.skipped"
    assert hooks(api, pid)[0]["last_delivery"]["status"] == "pending"


def test_deleting_a_webhook_cancels_its_pending_deliveries(api: Api) -> None:
    pid = api.create_pipeline()
    hook = api.call("POST", f"/pipelines/{pid}/webhooks", {"url": URL, "events": ALL}).body
    run_id = api.trigger(pid).body["id"]
    end_run(api.db_url, run_id, "succeeded")
    assert api.call("DELETE", f"/pipelines/{pid}/webhooks/{hook['id']}").status == 204
    assert [r[2] for r in deliveries(api, run_id)] == ["canceled"]
    second = api.trigger(pid, "second").body["id"]
    end_run(api.db_url, second, "succeeded")
    assert deliveries(api, second) == []  # a deleted webhook hears nothing more


def test_a_run_of_a_revision_without_a_step_list_still_ends_and_is_told(api: Api) -> None:
    # A revision written by hand that no validator would pass: its run fails at once (the
    # advancer), and the outbox trigger must neither stop that COMMIT nor lose the event.
    pid = api.create_pipeline()
    hook = api.call("POST", f"/pipelines/{pid}/webhooks", {"url": URL, "events": ALL}).body
    api.sql(
        "INSERT INTO revisions (pipeline_id, number, plan, created_by)"
        " VALUES (%s, 2, '{\"steps\": 5}', 'hand')",
        (pid,),
    )
    run_id = api.trigger(pid).body["id"]
    api.sql(
        "UPDATE runs SET revision = 2, status = 'failed', error = 'input_error: revision 2',"
        " finished_at = now() WHERE id = %s",
        (run_id,),
    )
    assert api.sql("SELECT status FROM runs WHERE id = %s", (run_id,)) == [("failed",)]
    ((webhook, event, status, run, _),) = deliveries(api, run_id)
    assert (webhook, event, status) == (hook["id"], "run.failed", "pending")
    assert run["status"] == "failed" and run["steps"] == 0 and run["step_counts"] == {}


def test_deleting_the_pipeline_deletes_its_webhooks_and_cancels_their_deliveries(api: Api) -> None:
    pid = api.create_pipeline()
    hook_ids = [
        api.call("POST", f"/pipelines/{pid}/webhooks", {"url": URL, "events": ALL}).body["id"]
        for _ in range(2)
    ]
    other = api.create_pipeline()  # another pipeline's webhook stays
    kept = api.call("POST", f"/pipelines/{other}/webhooks", {"url": URL, "events": ALL}).body
    run_id = api.trigger(pid).body["id"]
    end_run(api.db_url, run_id, "succeeded")
    api.sql(
        "UPDATE webhook_deliveries SET status = 'delivered' WHERE webhook_id = %s",
        (hook_ids[0],),
    )
    assert api.call("DELETE", f"/pipelines/{pid}").status == 204
    assert api.sql(
        "SELECT id::text, deleted_at IS NOT NULL FROM webhooks ORDER BY pipeline_id = %s, id",
        (pid,),
    ) == [(kept["id"], False), *sorted((h, True) for h in hook_ids)]
    assert {r[0]: r[2] for r in deliveries(api, run_id)} == {
        hook_ids[0]: "delivered",  # what has ended stays as it ended
        hook_ids[1]: "canceled",
    }
    (error,) = api.sql("SELECT last_error FROM webhook_deliveries WHERE status = 'canceled'")
    assert error == ("pipeline deleted",)
    for method, path, body in [
        ("GET", f"/pipelines/{pid}/webhooks", None),
        ("POST", f"/pipelines/{pid}/webhooks", {"url": URL, "events": ALL}),
        ("DELETE", f"/pipelines/{pid}/webhooks/{hook_ids[1]}", None),
    ]:
        a = api.call(method, path, body)
        assert a.status == 404, (method, path, a.body)
        assert a.body["error"]["message"] == f"pipeline {pid} not found"
    assert api.sql("SELECT count(*) FROM webhooks WHERE pipeline_id = %s", (pid,)) == [(2,)]
    (details,) = api.sql("SELECT details FROM audit WHERE action = 'pipeline.delete'")
    assert details[0]["webhooks_deleted"] == 2 and details[0]["deliveries_canceled"] == 1
    assert hooks(api, other)[0]["id"] == kept["id"]


def test_a_webhook_created_while_its_pipeline_is_deleted_finds_no_pipeline(api: Api) -> None:
    """The creation waits on the row lock the delete holds to its COMMIT, then finds the
    pipeline deleted (404): never a live webhook of a deleted pipeline."""
    pid = api.create_pipeline()
    db = Database(api.db_url)
    answers: list[int] = []
    try:
        with db.transaction() as cur:
            delete_pipeline(cur, pid, "test", request_id="race")
            body = {"url": URL, "events": ALL}
            create = threading.Thread(
                target=lambda: answers.append(
                    api.call("POST", f"/pipelines/{pid}/webhooks", body).status
                )
            )
            create.start()
            create.join(0.5)
            assert create.is_alive()  # waits for the pipeline's row lock
        create.join(10)
    finally:
        db.close()
    assert answers == [404]
    assert api.sql("SELECT count(*) FROM webhooks") == [(0,)]
