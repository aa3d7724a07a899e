"""Runs through the API: admission (idempotent keys, per-pipeline and global limits), the run
shape, revisions under PATCH, cancel, resume, and the audit trail."""

from __future__ import annotations

import re
import uuid

from service.domain.principals import ADMIN, OPERATOR
from tests.integration.testapp import Api, plan_copy

UTC_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
RUN_FIELDS = {
    "id",
    "pipeline_id",
    "revision",
    "status",
    "reason",
    "trigger_key",
    "trace_id",
    "created_at",
    "started_at",
    "finished_at",
    "steps",
}


def test_trigger_creates_a_queued_run_and_wakes_the_advancer(api: Api) -> None:
    pid = api.create_pipeline()
    a = api.trigger(pid, "nightly-1", role=OPERATOR)
    assert a.status == 201
    run = a.body
    assert set(run) >= RUN_FIELDS
    assert (run["status"], run["reason"], run["revision"], run["queue_position"]) == (
        "queued",
        None,
        1,
        1,
    )
    assert run["trigger_key"] == "nightly-1" and run["created_by"] == OPERATOR
    assert UTC_TS.match(run["created_at"]) and run["started_at"] is None
    assert a.headers["x-trace-id"] == run["trace_id"] and len(run["trace_id"]) == 32
    assert [(s["name"], s["type"], s["status"]) for s in run["steps"]] == [
        ("read", "ingest", "pending"),
        ("clean", "transform", "pending"),
        ("to_file", "export", "pending"),
    ]
    step = run["steps"][0]
    assert (step["attempts"], step["records_in"], step["rejected"], step["columns"]) == (
        [],
        0,
        0,
        {},
    )
    assert api.wakes == [(run["id"], run["trace_id"])]
    assert api.call("GET", f"/runs/{run['id']}").body == run


def test_a_repeated_trigger_key_returns_the_existing_run(api: Api) -> None:
    pid = api.create_pipeline()
    first = api.trigger(pid, "same")
    again = api.trigger(pid, "same", role=OPERATOR)
    assert (first.status, again.status) == (201, 200)
    assert again.body["id"] == first.body["id"]
    assert api.sql("SELECT count(*) FROM runs") == [(1,)]
    assert len(api.wakes) == 1
    other = api.trigger(api.create_pipeline(), "same")
    assert other.status == 201 and other.body["id"] != first.body["id"]


def test_without_a_key_each_trigger_is_a_new_run(api: Api) -> None:
    pid = api.create_pipeline()
    a, b = api.trigger(pid), api.trigger(pid)
    assert (a.status, b.status) == (201, 201)
    assert a.body["trigger_key"].startswith("manual:") and a.body["id"] != b.body["id"]
    assert b.body["queue_position"] == 2


def test_fifth_trigger_is_skipped_queue_full_and_recorded(api: Api) -> None:
    pid = api.create_pipeline()
    statuses = [api.trigger(pid, f"k{i}").status for i in range(4)]
    assert statuses == [201] * 4
    a = api.trigger(pid, "k4")
    assert a.status == 429
    assert (a.body["status"], a.body["reason"]) == ("skipped", "queue_full")
    assert a.body["error"]["code"] == "queue_full" and a.body["id"]
    assert api.sql("SELECT status, reason FROM runs WHERE id = %s", (a.body["id"],)) == [
        ("skipped", "queue_full")
    ]
    repeated = api.trigger(pid, "k4")
    assert (repeated.status, repeated.body["id"]) == (200, a.body["id"])
    assert len(api.wakes) == 4


def test_twenty_first_active_run_is_skipped_busy(api: Api) -> None:
    pipelines = [api.create_pipeline() for _ in range(6)]
    created = [api.trigger(p) for p in pipelines[:5] for _ in range(4)]
    assert [a.status for a in created] == [201] * 20
    created_ids = [a.body["id"] for a in created]
    a = api.trigger(pipelines[5], "late")
    assert (a.status, a.body["status"], a.body["reason"]) == (429, "skipped", "busy")
    full = api.trigger(pipelines[0], "also-late")
    assert full.body["reason"] == "queue_full"  # the pipeline limit is checked first
    api.sql("UPDATE runs SET status = 'succeeded' WHERE id = %s", (created_ids[0],))
    assert api.trigger(pipelines[5], "now-fits").status == 201


def test_patch_leaves_a_runs_revision_and_plan_alone(api: Api) -> None:
    pid = api.create_pipeline()
    run = api.trigger(pid).body
    plan = plan_copy()
    plan["steps"][2]["name"] = "export_v2"
    patched = api.call("PATCH", f"/pipelines/{pid}", {"plan": plan})
    assert (patched.status, patched.body["revision"]) == (200, 2)
    assert api.call("GET", f"/pipelines/{pid}").body["plan"]["steps"][2]["name"] == "export_v2"
    after = api.call("GET", f"/runs/{run['id']}").body
    assert after["revision"] == 1
    assert [s["name"] for s in after["steps"]] == ["read", "clean", "to_file"]
    assert api.call("GET", f"/pipelines/{pid}/revisions/1").body["plan"] == plan_copy()
    revisions = api.call("GET", f"/pipelines/{pid}/revisions").body
    assert [r["revision"] for r in revisions["items"]] == [2, 1]
    assert revisions["next"] is None and all("plan" not in r for r in revisions["items"])
    assert api.trigger(pid).body["revision"] == 2


def test_cancel_a_queued_run_at_once(api: Api) -> None:
    pid = api.create_pipeline()
    run = api.trigger(pid).body
    a = api.call("POST", f"/runs/{run['id']}/cancel", role=OPERATOR)
    assert a.status == 202
    assert a.body["status"] == "canceled" and UTC_TS.match(a.body["finished_at"])
    assert a.headers["x-trace-id"] == run["trace_id"]
    again = api.call("POST", f"/runs/{run['id']}/cancel")
    assert (again.status, again.body["error"]["code"]) == (409, "conflict")


def test_cancel_a_running_run_requests_it(api: Api) -> None:
    pid = api.create_pipeline()
    run_id = api.trigger(pid).body["id"]
    api.sql("UPDATE runs SET status = 'running', started_at = now() WHERE id = %s", (run_id,))
    a = api.call("POST", f"/runs/{run_id}/cancel", {})
    assert a.status == 202
    assert (a.body["status"], a.body["cancel_requested"]) == ("running", True)
    assert api.wakes[-1][0] == run_id
    for status in ("succeeded", "failed", "skipped"):
        reason = "busy" if status == "skipped" else None
        api.sql("UPDATE runs SET status = %s, reason = %s WHERE id = %s", (status, reason, run_id))
        assert api.call("POST", f"/runs/{run_id}/cancel").status == 409


def _make_failed_run(api: Api, pid: str) -> str:
    """A run the engine left failed: read succeeded, clean failed twice, to_file never ran."""
    run_id = api.trigger(pid).body["id"]
    api.sql(
        """
        UPDATE runs SET status = 'failed', started_at = now(), finished_at = now() WHERE id = %(r)s;
        INSERT INTO step_runs (run_id, name, type, position, status, records_in, records_out,
                               rejected, columns, input_digest, output_digest, checkpoint,
                               batches, error, started_at, finished_at)
        VALUES (%(r)s, 'read', 'ingest', 0, 'succeeded', 4, 3, 1,
                '[["id", "int"], ["name", "string"], ["amount", "int"]]', 'in-r', 'out-r',
                '{"offset": 99}', 2, NULL, now(), now()),
               (%(r)s, 'clean', 'transform', 1, 'failed', 3, 1, 0, '[["name", "string"]]',
                'in-c', 'out-c', '{"offset": 1}', 1, 'boom', now(), now()),
               (%(r)s, 'to_file', 'export', 2, 'upstream_failed', 0, 0, 0, NULL, NULL, NULL,
                NULL, 0, NULL, NULL, now());
        INSERT INTO attempts (run_id, step_name, number, executor, started_at, finished_at,
                              outcome, error)
        VALUES (%(r)s, 'read', 1, 'ex-1', now(), now(), 'succeeded', NULL),
               (%(r)s, 'clean', 2, 'ex-2', now(), now(), 'failed', 'boom'),
               (%(r)s, 'clean', 1, 'ex-1', now(), now(), 'failed', 'boom once');
        INSERT INTO step_batches (run_id, step_name, seq, records, payload)
        VALUES (%(r)s, 'read', 0, 2, 'x'), (%(r)s, 'read', 1, 1, 'x'), (%(r)s, 'clean', 0, 1, 'x');
        """,
        {"r": run_id},
    )
    return run_id


def test_run_shape_with_step_rows_and_attempts(api: Api) -> None:
    run_id = _make_failed_run(api, api.create_pipeline())
    run = api.call("GET", f"/runs/{run_id}").body
    read, clean, to_file = run["steps"]
    assert list(read["columns"].items()) == [("id", "int"), ("name", "string"), ("amount", "int")]
    assert (read["records_in"], read["records_out"], read["rejected"]) == (4, 3, 1)
    assert (read["input_digest"], read["output_digest"], read["checkpoint"]) == (
        "in-r",
        "out-r",
        {"offset": 99},
    )
    assert [a["number"] for a in clean["attempts"]] == [1, 2]
    assert set(clean["attempts"][0]) == {
        "number",
        "executor",
        "started_at",
        "finished_at",
        "outcome",
        "error",
        "fused_into",
    }
    assert clean["attempts"][0]["fused_into"] is None
    assert (clean["status"], clean["error"]) == ("failed", "boom")
    assert (to_file["status"], to_file["columns"], to_file["attempts"]) == (
        "upstream_failed",
        {},
        [],
    )
    assert run["error"] == "step clean: boom"


def test_resume_resets_failed_steps_and_keeps_succeeded_ones(api: Api) -> None:
    pid = api.create_pipeline()
    run_id = _make_failed_run(api, pid)
    before = api.call("GET", f"/runs/{run_id}").body
    a = api.call("POST", f"/runs/{run_id}/resume", role=OPERATOR)
    assert a.status == 202
    run = a.body
    assert (run["status"], run["finished_at"], run["queue_position"]) == ("queued", None, 1)
    assert run["started_at"] == before["started_at"]  # its duration counts from its first start
    read, clean, to_file = run["steps"]
    assert read == before["steps"][0]
    for step in (clean, to_file):
        assert step["status"] == "pending"
        assert (step["records_in"], step["records_out"], step["rejected"]) == (0, 0, 0)
        assert (step["checkpoint"], step["input_digest"], step["output_digest"]) == (None,) * 3
        assert (step["columns"], step["error"], step["batches"]) == ({}, None, 0)
    assert [a["number"] for a in clean["attempts"]] == [1, 2]  # history is kept
    batches = api.sql("SELECT step_name, seq FROM step_batches ORDER BY 1, 2")
    assert batches == [("read", 0), ("read", 1)]
    assert api.wakes[-1] == (run_id, run["trace_id"])
    assert api.call("POST", f"/runs/{run_id}/resume").status == 409


def test_resume_only_a_failed_run(api: Api) -> None:
    pid = api.create_pipeline()
    run_id = api.trigger(pid).body["id"]
    for status in ("queued", "running", "succeeded", "canceled"):
        api.sql("UPDATE runs SET status = %s WHERE id = %s", (status, run_id))
        a = api.call("POST", f"/runs/{run_id}/resume")
        assert (a.status, a.body["error"]["code"]) == (409, "conflict"), status


def test_resume_obeys_the_queue_limit(api: Api) -> None:
    pid = api.create_pipeline()
    run_id = _make_failed_run(api, pid)
    for i in range(4):
        assert api.trigger(pid, f"fill-{i}").status == 201
    a = api.call("POST", f"/runs/{run_id}/resume")
    assert (a.status, a.body["reason"], a.body["error"]["code"]) == (
        429,
        "queue_full",
        "queue_full",
    )
    assert api.sql("SELECT status FROM runs WHERE id = %s", (run_id,)) == [("failed",)]


def test_list_runs_newest_first_with_limit(api: Api) -> None:
    pid = api.create_pipeline()
    ids = [api.trigger(pid).body["id"] for _ in range(3)]
    a = api.call("GET", f"/pipelines/{pid}/runs?limit=2")
    assert [r["id"] for r in a.body["items"]] == ids[::-1][:2]
    assert a.body["next"] is not None
    assert all(r["step_counts"] == {"pending": 3} for r in a.body["items"])


def test_every_mutating_call_writes_an_audit_row(api: Api) -> None:
    pid = api.create_pipeline("audited")
    api.call("PATCH", f"/pipelines/{pid}", {"plan": plan_copy()}, headers={"X-Request-Id": "req-7"})
    run = api.trigger(pid, "a1", role=OPERATOR).body
    api.trigger(pid, "a1")
    api.call("POST", f"/runs/{run['id']}/cancel", role=OPERATOR)
    failed = _make_failed_run(api, pid)
    api.call("POST", f"/runs/{failed}/resume")
    schedule = api.call("POST", f"/pipelines/{pid}/schedules", {"every_minutes": 5}).body
    api.call("DELETE", f"/pipelines/{pid}/schedules/{schedule['id']}")
    rows = api.call("GET", "/audit?limit=100").body["items"]
    got = [(r["action"], r["principal"], r["details"].get("outcome")) for r in reversed(rows)]
    assert got == [
        ("pipeline.create", ADMIN, None),
        ("pipeline.update", ADMIN, None),
        ("run.trigger", OPERATOR, "created"),
        ("run.trigger", ADMIN, "existing"),
        ("run.cancel", OPERATOR, "canceled"),
        ("run.trigger", ADMIN, "created"),  # the run _make_failed_run starts from
        ("run.resume", ADMIN, "requeued"),
        ("schedule.create", ADMIN, None),
        ("schedule.delete", ADMIN, None),
    ]
    assert all(r["trace_id"] for r in rows)
    update = next(r for r in rows if r["action"] == "pipeline.update")
    assert (update["entity_id"], update["trace_id"]) == (pid, "req-7")
    runs = [r for r in rows if r["entity_id"] == run["id"]]
    assert {r["trace_id"] for r in runs} == {run["trace_id"]}
    by_entity = api.call("GET", f"/audit?entity_id={run['id']}").body["items"]
    assert len(by_entity) == 3


def test_a_paused_pipeline_admits_no_run_and_unpaused_admits_again(api: Api) -> None:
    """Pause: a trigger answers 409 pipeline_paused (a repeated key still finds its run), a
    schedule fire makes no run, the runs admitted before stay; unpause: triggers work again.
    Admins only, audited."""
    pid = api.create_pipeline()
    before = api.trigger(pid, "before")
    assert before.status == 201
    assert api.call("POST", f"/pipelines/{pid}/pause", role=OPERATOR).status == 403
    paused = api.call("POST", f"/pipelines/{pid}/pause")
    assert paused.status == 200 and paused.body["paused"] is True
    assert api.call("GET", f"/pipelines/{pid}").body["paused"] is True
    refused = api.trigger(pid, "during")
    assert refused.status == 409 and refused.body["error"]["code"] == "pipeline_paused"
    again = api.trigger(pid, "before")  # a repeated key: the existing run, as always
    assert again.status == 200 and again.body["id"] == before.body["id"]
    assert api.call("GET", f"/runs/{before.body['id']}").body["status"] == "queued"
    unpaused = api.call("POST", f"/pipelines/{pid}/unpause")
    assert unpaused.status == 200 and unpaused.body["paused"] is False
    assert api.trigger(pid, "after").status == 201
    assert api.call("POST", f"/pipelines/{uuid.uuid4()}/pause").status == 404
    actions = api.sql(
        "SELECT action FROM audit WHERE entity_id = %s AND action LIKE 'pipeline.%%pause'"
        " ORDER BY id",
        (pid,),
    )
    assert actions == [("pipeline.pause",), ("pipeline.unpause",)]
