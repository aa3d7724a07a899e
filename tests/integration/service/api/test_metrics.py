"""`GET /metrics`: Prometheus text read from the database at scrape time. First on states
written with SQL (every metric, known values), then after real runs on `etl up`, compared
with SQL counts of the same database."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from drills import ADMIN_TOKEN, ROOT, Stack
from service.domain.db import Database
from tests.integration.testapp import Api

Samples = dict[tuple[str, frozenset], float]


def parse(text: str) -> Samples:
    """{(sample name, labels): value} of a Prometheus text answer."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    """{label value: sample value} of the non-zero samples of `name`."""
    return {dict(k[1])[label]: v for k, v in samples.items() if k[0] == name and v and k[1]}


def _seed_known_states(api: Api) -> None:
    """Two pipelines with runs in every status, three steps of one running run and their
    attempts, two of them taken over."""
    a, b = api.create_pipeline("alpha"), api.create_pipeline("beta")
    insert = (
        "INSERT INTO runs (id, pipeline_id, revision, status, reason, trigger_key, trace_id,"
        " created_by, created_at) VALUES (gen_random_uuid(), %s, 1, %s, %s, %s, 't', 'test',"
        " now() - %s * interval '1 second')"
    )
    rows = [
        (a, "queued", None, "q1", 90),
        (a, "queued", None, "q2", 0),
        (b, "queued", None, "schedule:s:2026-01-01T00:00:00Z", 0),
        (b, "running", None, "r1", 0),
        (a, "succeeded", None, "ok1", 0),
        (a, "succeeded", None, "ok2", 0),
        (a, "failed", None, "bad", 0),
        (a, "skipped", "queue_full", "s1", 0),
        (a, "skipped", "queue_full", "schedule:s:2026-01-01T00:05:00Z", 0),
        (b, "skipped", "busy", "s3", 0),
    ]
    for row in rows:
        api.sql(insert, row)
    (run_id,) = api.sql("SELECT id FROM runs WHERE trigger_key = 'r1'")[0]
    api.sql(
        "INSERT INTO step_runs (run_id, name, type, position, status, records_in, records_out,"
        " rejected, started_at, finished_at) VALUES"
        " (%(r)s, 'read', 'ingest', 0, 'succeeded', 10, 8, 2, now() - interval '3 s',"
        "  now() - interval '1 s'),"
        " (%(r)s, 'clean', 'transform', 1, 'failed', 8, 0, 0, now() - interval '0.3 s', now()),"
        " (%(r)s, 'out', 'export', 2, 'running', 5, 5, 0, now(), NULL)",
        {"r": run_id},
    )
    api.sql(
        "INSERT INTO attempts (run_id, step_name, number, executor, lease_owner,"
        " lease_expires_at, outcome) VALUES"
        " (%(r)s, 'read', 1, 'executor-1:b1', 'executor-1:b1', now(), 'lease_expired'),"
        " (%(r)s, 'read', 2, 'executor-2:b2', 'executor-2:b2', now(), 'succeeded'),"
        " (%(r)s, 'clean', 1, 'executor-2:b2', 'executor-2:b2', now(), 'failed'),"
        " (%(r)s, 'out', 1, 'executor-1:b1', 'executor-1:b1', now(), 'lease_expired'),"
        " (%(r)s, 'out', 2, 'executor-2:b2', 'executor-2:b2', now() + interval '1 h', NULL)",
        {"r": run_id},
    )


def test_every_metric_on_known_states_needs_no_token(api: Api) -> None:
    _seed_known_states(api)
    answer = api.client.simulate_get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=")
    m = parse(answer.text)
    assert value(m, "etl_database_up") == 1
    assert by_label(m, "etl_runs", "status") == {
        "queued": 3, "running": 1, "succeeded": 2, "failed": 1, "skipped": 3,
    }  # fmt: skip
    assert m[("etl_runs", frozenset({("status", "canceled")}))] == 0  # present, zero
    assert by_label(m, "etl_queue_depth", "pipeline") == {"alpha": 2, "beta": 1}
    assert by_label(m, "etl_skipped_triggers_total", "reason") == {"queue_full": 2, "busy": 1}
    assert by_label(m, "etl_active_leases", "executor") == {"executor-2": 1}
    assert by_label(m, "etl_lease_takeovers_total", "executor") == {"executor-1": 2}
    assert by_label(m, "etl_attempts_total", "outcome") == {
        "lease_expired": 2, "succeeded": 1, "failed": 1,
    }  # fmt: skip
    ingest = {"type": "ingest", "status": "succeeded"}
    assert value(m, "etl_step_duration_seconds_count", **ingest) == 1
    assert value(m, "etl_step_duration_seconds_sum", **ingest) == pytest.approx(2.0)
    assert value(m, "etl_step_duration_seconds_bucket", le="1.0", **ingest) == 0
    assert value(m, "etl_step_duration_seconds_bucket", le="2.5", **ingest) == 1
    failed = {"type": "transform", "status": "failed"}
    assert value(m, "etl_step_duration_seconds_bucket", le="0.5", **failed) == 1
    assert value(m, "etl_step_duration_seconds_bucket", le="+Inf", **failed) == 1
    assert value(m, "etl_step_records_total", type="ingest", direction="in") == 10
    assert value(m, "etl_step_records_total", type="ingest", direction="out") == 8
    assert by_label(m, "etl_rejected_rows_total", "type") == {"ingest": 2}
    assert value(m, "etl_schedule_fires_total", pipeline="beta", outcome="admitted") == 1
    assert value(m, "etl_schedule_fires_total", pipeline="alpha", outcome="skipped") == 1
    assert 90 <= value(m, "etl_oldest_queued_run_age_seconds") < 3600


def test_without_a_database_the_scrape_says_so(app_factory) -> None:
    dead = app_factory(db=Database("postgresql://postgres@127.0.0.1:1/nowhere"))
    answer = dead.client.simulate_get("/metrics")
    assert answer.status_code == 200
    assert parse(answer.text) == {("etl_database_up", frozenset()): 0.0}


# --- after real runs -------------------------------------------------------------------------


def test_scraped_values_match_sql_counts_after_real_runs(demo_stack: Stack, tmp_path: Path) -> None:
    demo = json.loads((ROOT / "fixtures" / "plans" / "demo.json").read_text())
    broken = json.loads(json.dumps(demo))
    broken["name"], broken["plan"]["steps"][0]["config"]["path"] = "broken", "missing.csv"
    env = {**demo_stack.env, "ETL_TOKEN": ADMIN_TOKEN}
    for doc, expected in ((demo, 0), (broken, 1), (demo, 0)):
        path = tmp_path / f"{doc['name']}.json"
        path.write_text(json.dumps(doc))
        for args in (["pipelines", "apply", str(path)], ["run", doc["name"], "--wait"]):
            done = subprocess.run(
                [sys.executable, "-m", "service", *args],
                env=env, cwd=ROOT, capture_output=True, text=True, timeout=180,
            )  # fmt: skip
            assert done.returncode == (expected if args[0] == "run" else 0), done.stderr

    url = f"http://127.0.0.1:{demo_stack.port}/metrics"
    with urllib.request.urlopen(url, timeout=30) as resp:
        m = parse(resp.read().decode())

    runs = dict(demo_stack.sql("SELECT status, count(*) FROM runs GROUP BY status"))
    assert runs == {"succeeded": 2, "failed": 1}
    assert by_label(m, "etl_runs", "status") == runs
    attempts = dict(
        demo_stack.sql(
            "SELECT outcome, count(*) FROM attempts WHERE outcome IS NOT NULL GROUP BY 1"
        )
    )
    assert by_label(m, "etl_attempts_total", "outcome") == attempts
    assert attempts["input_error"] >= 1 and attempts["succeeded"] == 16
    (steps,) = demo_stack.sql(
        "SELECT count(*), sum(records_in), sum(records_out), sum(rejected) FROM step_runs"
        " WHERE status = 'succeeded'"
    )
    counts = [k for k in m if k[0] == "etl_step_duration_seconds_count"]
    succeeded = sum(m[k] for k in counts if ("status", "succeeded") in k[1])
    assert succeeded == steps[0] == 16
    assert (
        sum(
            v
            for k, v in m.items()
            if k[0] == "etl_step_records_total" and ("direction", "in") in k[1]
        )
        == steps[1]
    )
    assert (
        sum(
            v
            for k, v in m.items()
            if k[0] == "etl_step_records_total" and ("direction", "out") in k[1]
        )
        == steps[2]
    )
    assert sum(by_label(m, "etl_rejected_rows_total", "type").values()) == steps[3] > 0
    assert by_label(m, "etl_active_leases", "executor") == {}
    assert by_label(m, "etl_queue_depth", "pipeline") == {}
    assert value(m, "etl_oldest_queued_run_age_seconds") == 0
