"""Every run ends: a step waiting to retry whose upstream failed for good ends
`upstream_failed` with it, fused or not, under both policies (real coordinator and
executors; the reproduction of a run once stuck in `running` for good)."""

from __future__ import annotations

import pytest

from actors import advance_pipeline, build_broker, sweep_once

N = 5000
BAD_LINE = 3001  # the header is line 1: record 3000 has a bad int


def _plan(on_failure: str) -> dict:
    return {
        "on_failure": on_failure,
        "on_row_error": "stop",
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "p.csv", "columns": {"id": "int"}}},
            {"name": "clean", "type": "transform", "depends_on": ["read"],
             "config": {"op": "normalize_whitespace", "columns": ["name"]}},
            {"name": "to_table", "type": "export", "depends_on": ["clean"],
             "config": {"target": "table", "table": "ended_people", "key": "id"}},
            {"name": "to_file", "type": "export", "depends_on": ["clean"],
             "config": {"target": "file", "path": "p.jsonl"}},
        ],
    }  # fmt: skip


def _csv() -> str:
    rows = [f"{i},Person {i}\n" for i in range(1, N + 1)]
    rows[BAD_LINE - 2] = "x3000,Person 3000\n"
    return "id,name\n" + "".join(rows)


@pytest.mark.parametrize("fusion", ["1", "0"])
@pytest.mark.parametrize("on_failure", ["stop_dependents", "continue_independent"])
def test_a_retry_waiting_on_a_failed_upstream_ends_upstream_failed(
    stack_factory, on_failure: str, fusion: str
) -> None:
    env = {"ETL_FAULT": "fail_attempts:step=to_table:times=1", "ETL_FUSION": fusion}
    stack = stack_factory(env=env)
    (stack.data / "p.csv").write_text(_csv())
    try:
        stack.start()
        run_id = stack.trigger(stack.create("ended", _plan(on_failure)))[1]["id"]
        # lease (3 s) + both retry delays (1 s, 2 s) + sweeps, with room to spare
        run = stack.wait_run(run_id, timeout=30)
    finally:
        stack.stop()
    steps = {s["name"]: s for s in run["steps"]}
    assert run["status"] == "failed", run
    assert steps["read"]["status"] == "failed"
    assert f"line {BAD_LINE}" in steps["read"]["error"], steps["read"]["error"]
    for name in ("clean", "to_table", "to_file"):
        assert steps[name]["status"] == "upstream_failed", (name, steps[name])
    if fusion == "1":  # the follower did fail once, and waited for a retry
        assert steps["to_table"]["attempts"][0]["outcome"] == "failed"
    assert not (stack.exports / run["id"] / "p.jsonl").exists()


def test_the_sweep_ends_a_run_with_nothing_runnable_and_goes_on_with_the_next(api, conn) -> None:
    """A run whose state no advance can move (a step `running` with no open attempt, as a
    defect would leave it) is ended by the sweep once nothing was runnable for the lease,
    and its pipeline's queued run starts."""
    pid = api.create_pipeline()
    stuck, nxt = (api.trigger(pid, key).body["id"] for key in ("a", "b"))
    broker = build_broker(api.db_url, max_connections=2)
    try:
        advance_pipeline(conn, pid)
        api.sql(
            "UPDATE attempts SET outcome = 'failed', finished_at = now() - interval '1 hour'"
            " WHERE run_id = %s",
            (stuck,),
        )
        api.sql("UPDATE runs SET started_at = now() - interval '1 hour' WHERE id = %s", (stuck,))
        assert sweep_once(conn, broker, unclaimed_after_s=5).stalled == []  # not asked
        assert sweep_once(conn, broker, unclaimed_after_s=5, stalled_after_s=3600 * 2).stalled == []
        report = sweep_once(conn, broker, unclaimed_after_s=5, stalled_after_s=30)
    finally:
        broker.close()
    assert report.stalled == [stuck]
    run = api.call("GET", f"/runs/{stuck}").body
    steps = {s["name"]: s for s in run["steps"]}
    assert run["status"] == "failed"
    assert steps["read"]["status"] == "failed"
    assert steps["read"]["error"] == "stalled: nothing was runnable for 30 s"
    assert steps["clean"]["status"] == steps["to_file"]["status"] == "upstream_failed"
    assert api.call("GET", f"/runs/{nxt}").body["status"] == "running"
    metrics = api.client.simulate_get("/metrics").text
    assert "etl_runs_stalled_total{pipeline=" in metrics and "} 1.0" in metrics


def test_a_revision_that_no_longer_validates_fails_its_run_and_jams_nothing(api, conn) -> None:
    """A revision written by hand (or accepted by an older release) that today's validator
    refuses: a trigger answers 409 naming the problems, a run of it already queued fails at
    once naming the revision, and the sweep goes on advancing every other pipeline."""
    bad_pid, good_pid = api.create_pipeline(), api.create_pipeline()
    queued = api.trigger(bad_pid, "before").body["id"]
    bad_plan = '{"steps": [{"name": "x", "type": "ingest", "config": {"source": "file"}}]}'
    api.sql(
        "INSERT INTO revisions (pipeline_id, number, plan, created_by) VALUES (%s, 2, %s, 'hand')",
        (bad_pid, bad_plan),
    )
    api.sql("UPDATE pipelines SET revision = 2 WHERE id = %s", (bad_pid,))
    api.sql("UPDATE runs SET revision = 2 WHERE id = %s", (queued,))
    refused = api.trigger(bad_pid, "after")
    assert refused.status == 409, refused.body
    assert refused.body["error"]["code"] == "plan_invalid"
    assert "revision 2" in refused.body["error"]["message"]
    assert {d["field"] for d in refused.body["error"]["details"]} == {"plan.steps[0].config.path"}
    good = api.trigger(good_pid).body["id"]
    broker = build_broker(api.db_url, max_connections=2)
    try:
        sweep_once(conn, broker, unclaimed_after_s=5, stalled_after_s=30)
    finally:
        broker.close()
    run = api.call("GET", f"/runs/{queued}").body
    assert run["status"] == "failed"
    assert run["error"].startswith("input_error: revision 2 of the pipeline is not a valid plan")
    assert "plan.steps[0].config.path" in run["error"]
    assert [s["status"] for s in run["steps"]] == ["not_run"]
    assert api.call("GET", f"/runs/{good}").body["status"] == "running"
    resumed = api.call("POST", f"/runs/{queued}/resume")
    assert resumed.status == 409 and resumed.body["error"]["code"] == "plan_invalid"
