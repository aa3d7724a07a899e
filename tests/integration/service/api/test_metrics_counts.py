"""Two counters that count what they say (migration 0022): one lease takeover per lost lease
however many fused steps it held, and the records of a step that failed."""

from __future__ import annotations

from tests.integration.service.api.test_metrics import by_label, parse
from tests.integration.testapp import Api


def test_one_lost_lease_of_a_fused_group_is_one_takeover_and_failed_steps_count_rejects(
    api: Api,
) -> None:
    pid = api.create_pipeline("fused")
    ((run_id,),) = api.sql(
        "INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id, created_by)"
        " VALUES (gen_random_uuid(), %s, 1, 'running', 'k', 't', 'test') RETURNING id",
        (pid,),
    )
    api.sql(
        "INSERT INTO step_runs (run_id, name, type, position) VALUES (%(r)s, 'read', 'ingest', 0),"
        " (%(r)s, 'clean', 'transform', 1), (%(r)s, 'out', 'export', 2)",
        {"r": run_id},
    )
    ((leader,),) = api.sql(
        "INSERT INTO attempts (run_id, step_name, number, executor, lease_owner,"
        " lease_expires_at) VALUES (%s, 'read', 1, 'executor-1:b1', 'executor-1:b1', now())"
        " RETURNING id",
        (run_id,),
    )
    api.sql(
        "INSERT INTO attempts (run_id, step_name, number, fused_into, executor) VALUES"
        " (%(r)s, 'clean', 1, %(l)s, 'executor-1:b1'), (%(r)s, 'out', 1, %(l)s, 'executor-1:b1')",
        {"r": run_id, "l": leader},
    )
    api.sql("UPDATE attempts SET outcome = 'lease_expired' WHERE run_id = %s", (run_id,))
    api.sql(
        "UPDATE step_runs SET status = 'failed', records_in = 40, records_out = 30,"
        " rejected = 3, finished_at = now() WHERE run_id = %s AND name = 'read'",
        (run_id,),
    )
    m = parse(api.client.simulate_get("/metrics").text)
    assert by_label(m, "etl_attempts_total", "outcome", pipeline="fused") == {"lease_expired": 3}
    assert by_label(m, "etl_lease_takeovers_total", "executor", pipeline="fused") == {
        "executor-1": 1
    }
    read = {"pipeline": "fused", "step": "read"}
    assert by_label(m, "etl_records_total", "kind", **read) == {"in": 40, "rejected": 3}
