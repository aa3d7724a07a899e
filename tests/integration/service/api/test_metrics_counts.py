"""Counters that count what they say: one lease takeover per lost lease however many fused
steps it held, and the records of a step that failed (migration 0022); the check results of
steps that ended (migration 0029)."""

from __future__ import annotations

import subprocess

import psycopg2.extras

from actors import fold_metric_deltas
from ddl import connect
from tests.integration.service.api.test_metrics import by_label, parse
from tests.integration.testapp import Api
from tests.programs import program


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


def test_check_results_count_by_kind_and_outcome_when_their_step_ends(api: Api) -> None:
    """`etl_checks_total` (migration 0029): one per check result of a step that ended
    succeeded or failed, by kind and outcome, the same after a fold; nothing for a step
    still running or waiting to retry; clean under promtool."""
    pid = api.create_pipeline("checked")
    ((run_id,),) = api.sql(
        "INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id, created_by)"
        " VALUES (gen_random_uuid(), %s, 1, 'running', 'k', 't', 'test') RETURNING id",
        (pid,),
    )
    api.sql(
        "INSERT INTO step_runs (run_id, name, type, position) VALUES (%(r)s, 'read', 'ingest', 0),"
        " (%(r)s, 'out', 'export', 1)",
        {"r": run_id},
    )
    read = [("not_null", "passed"), ("not_null", "warned"), ("unique", "failed")]
    checks = [{"check": c, "outcome": o, "failing": 0, "examples": []} for c, o in read]
    out = [{"check": "row_count", "outcome": "passed", "failing": 0, "examples": []}]
    for name, results in (("read", checks), ("out", out)):
        api.sql(
            "UPDATE step_runs SET status = 'running', checks = %s WHERE run_id = %s AND name = %s",
            (psycopg2.extras.Json(results), run_id, name),
        )
    api.sql("UPDATE step_runs SET status = 'retry_wait' WHERE run_id = %s", (run_id,))
    assert "etl_checks_total{" not in api.client.simulate_get("/metrics").text
    api.sql("UPDATE step_runs SET status = 'failed' WHERE run_id = %s AND name = 'read'", (run_id,))
    api.sql(
        "UPDATE step_runs SET status = 'succeeded' WHERE run_id = %s AND name = 'out'", (run_id,)
    )
    for fold in (False, True):
        if fold:
            conn = connect(api.db_url, "etl-test-fold")
            try:
                fold_metric_deltas(conn)
            finally:
                conn.close()
        text = api.client.simulate_get("/metrics").text
        m = parse(text)
        read_labels = {"pipeline": "checked", "step": "read"}
        assert by_label(m, "etl_checks_total", "outcome", check="not_null", **read_labels) == {
            "passed": 1, "warned": 1
        }  # fmt: skip
        assert by_label(m, "etl_checks_total", "check", outcome="failed", **read_labels) == {
            "unique": 1
        }
        assert by_label(m, "etl_checks_total", "check", pipeline="checked", step="out") == {
            "row_count": 1
        }
    lint = subprocess.run(
        [program("promtool"), "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), lint.stdout
