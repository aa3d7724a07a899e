"""`GET /metrics`: counters kept as the state changes (triggers append deltas, the sweep
folds them), gauges of the present read live. First on states written with SQL transitions
(every metric, known values, the same before and after a fold), then after real runs on a
real topology: compared with SQL counts of the same database, before and after a purge,
clean under `promtool check metrics`, scraped by a real Prometheus server, and executor
liveness seen to drop when an executor is killed."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from actors import fold_metric_deltas, purge_finished_runs
from ddl import connect
from drills import ADMIN_TOKEN, ROOT, Stack, free_port, wait_until
from service.domain.db import Database
from service.domain.processmetrics import RequestTotals
from tests.integration.testapp import Api
from tests.programs import program

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


def by_label(samples: Samples, name: str, label: str, **fixed: str) -> dict[str, float]:
    """{label value: sample value} of the non-zero samples of `name` with the `fixed` labels."""
    out = {}
    for (sample, labels), v in samples.items():
        own = dict(labels)
        if sample == name and v and all(own.get(k) == x for k, x in fixed.items()):
            out[own[label]] = v
    return out


def total(samples: Samples, name: str, **fixed: str) -> float:
    """The sum of `name` over every label set with the `fixed` labels."""
    return sum(
        v
        for (sample, labels), v in samples.items()
        if sample == name and all(dict(labels).get(k) == x for k, x in fixed.items())
    )


def _seed_known_states(api: Api) -> None:
    """Two pipelines with runs in every status, three steps of one running run and their
    attempts (two taken over), two executors: each written as the engine moves it (created,
    then updated), so the triggers see the same transitions as in production."""
    a, b = api.create_pipeline("alpha"), api.create_pipeline("beta")
    insert = (
        "INSERT INTO runs (id, pipeline_id, revision, status, reason, trigger_key, trace_id,"
        " created_by, created_at) VALUES (gen_random_uuid(), %s, 1, %s, %s, %s, 't', 'test',"
        " now() - %s * interval '1 second') RETURNING id"
    )
    rows = [
        (a, "queued", None, "q1", 90, None),
        (a, "queued", None, "q2", 0, None),
        (b, "queued", None, "schedule:s:2026-01-01T00:00:00Z", 0, None),
        (b, "queued", None, "r1", 0, "running"),
        (a, "queued", None, "ok1", 0, "succeeded"),
        (a, "queued", None, "ok2", 0, "succeeded"),
        (a, "queued", None, "bad", 0, "failed"),
        (a, "skipped", "queue_full", "s1", 0, None),
        (a, "skipped", "queue_full", "schedule:s:2026-01-01T00:05:00Z", 0, None),
        (b, "skipped", "busy", "s3", 0, None),
    ]
    for pid, status, reason, key, age, then in rows:
        ((run_id,),) = api.sql(insert, (pid, status, reason, key, age))
        if then:
            api.sql(
                "UPDATE runs SET status = 'running', started_at = now() - interval '4 s'"
                " WHERE id = %s",
                (run_id,),
            )
        if then in ("succeeded", "failed"):
            api.sql(
                "UPDATE runs SET status = %s, finished_at = now() WHERE id = %s", (then, run_id)
            )
    (run_id,) = api.sql("SELECT id FROM runs WHERE trigger_key = 'r1'")[0]
    api.sql(
        "INSERT INTO step_runs (run_id, name, type, position) VALUES"
        " (%(r)s, 'read', 'ingest', 0), (%(r)s, 'clean', 'transform', 1),"
        " (%(r)s, 'out', 'export', 2)",
        {"r": run_id},
    )
    api.sql(
        "UPDATE step_runs SET status = 'running', started_at = now() - interval '0.3 s'"
        " WHERE run_id = %s",
        (run_id,),
    )
    api.sql(
        "UPDATE step_runs SET status = 'succeeded', records_in = 10, records_out = 8,"
        " rejected = 2, started_at = now() - interval '3 s', finished_at = now() - interval '1 s'"
        " WHERE run_id = %s AND name = 'read'",
        (run_id,),
    )
    api.sql(
        "UPDATE step_runs SET status = 'retry_wait' WHERE run_id = %s AND name = 'clean'",
        (run_id,),
    )
    api.sql(
        "UPDATE step_runs SET status = 'failed', finished_at = now(), records_in = 8,"
        " records_out = 5, rejected = 3 WHERE run_id = %s AND name = 'clean'",
        (run_id,),
    )
    api.sql(
        "INSERT INTO attempts (run_id, step_name, number, executor, lease_owner,"
        " lease_expires_at) VALUES"
        " (%(r)s, 'read', 1, 'executor-1:b1', 'executor-1:b1', now()),"
        " (%(r)s, 'read', 2, 'executor-2:b2', 'executor-2:b2', now()),"
        " (%(r)s, 'clean', 1, 'executor-2:b2', 'executor-2:b2', now()),"
        " (%(r)s, 'out', 1, 'executor-1:b1', 'executor-1:b1', now()),"
        " (%(r)s, 'out', 2, 'executor-2:b2', 'executor-2:b2', now() + interval '1 h')",
        {"r": run_id},
    )
    api.sql(
        "UPDATE attempts SET outcome = CASE WHEN number = 2 THEN 'succeeded' ELSE"
        " 'lease_expired' END WHERE run_id = %s AND step_name IN ('read', 'out')"
        " AND NOT (step_name = 'out' AND number = 2)",
        (run_id,),
    )
    api.sql(
        "UPDATE attempts SET outcome = 'failed' WHERE run_id = %s AND step_name = 'clean'",
        (run_id,),
    )
    api.sql(
        "INSERT INTO executors (name, owner, pid, stale_after_s, heartbeat_at, stopped_at) VALUES"
        " ('executor-1', 'executor-1:b1', 1, 30, now() - interval '2 s', NULL),"
        " ('executor-2', 'executor-2:b2', 2, 30, now() - interval '45 s', NULL),"
        " ('executor-3', 'executor-3:b3', 3, 30, now(), now()),"
        " ('executor-4', 'executor-4:b4', 4, 30, now() - interval '2 h', NULL)"
    )


def _check_known_states(m: Samples) -> None:
    assert value(m, "etl_database_up") == 1
    assert by_label(m, "etl_runs_total", "status", pipeline="alpha") == {
        "succeeded": 2, "failed": 1, "skipped": 2,
    }  # fmt: skip
    assert by_label(m, "etl_runs_total", "status", pipeline="beta") == {"skipped": 1}
    assert ("etl_runs_total", frozenset({("pipeline", "beta"), ("status", "canceled")})) in m
    assert by_label(m, "etl_triggers_skipped_total", "reason", pipeline="alpha") == {
        "queue_full": 2
    }
    assert by_label(m, "etl_triggers_skipped_total", "reason", pipeline="beta") == {"busy": 1}
    assert by_label(m, "etl_queue_depth", "pipeline") == {"alpha": 2, "beta": 1}
    assert by_label(m, "etl_runs_running", "pipeline") == {"beta": 1}
    assert value(m, "etl_run_duration_seconds_count", pipeline="alpha") == 3
    assert value(m, "etl_run_duration_seconds_bucket", pipeline="alpha", le="2.5") == 0
    assert value(m, "etl_run_duration_seconds_bucket", pipeline="alpha", le="5.0") == 3
    assert value(m, "etl_run_duration_seconds_sum", pipeline="alpha") == pytest.approx(12, abs=1)
    assert (
        time.time() - value(m, "etl_pipeline_last_success_timestamp_seconds", pipeline="alpha") < 60
    )
    assert value(m, "etl_pipeline_last_failure_timestamp_seconds", pipeline="alpha") > 0
    assert (
        "etl_pipeline_last_success_timestamp_seconds",
        frozenset({("pipeline", "beta")}),
    ) not in m
    assert by_label(m, "etl_active_leases", "executor") == {"executor-2": 1}
    assert by_label(m, "etl_lease_takeovers_total", "executor", pipeline="beta") == {
        "executor-1": 2
    }
    assert by_label(m, "etl_attempts_total", "outcome", pipeline="beta") == {
        "lease_expired": 2, "succeeded": 1, "failed": 1,
    }  # fmt: skip
    read = {"pipeline": "beta", "step": "read"}
    assert value(m, "etl_step_duration_seconds_count", **read) == 1
    assert value(m, "etl_step_duration_seconds_sum", **read) == pytest.approx(2.0)
    assert value(m, "etl_step_duration_seconds_bucket", le="1.0", **read) == 0
    assert value(m, "etl_step_duration_seconds_bucket", le="2.5", **read) == 1
    clean = {"pipeline": "beta", "step": "clean"}
    assert value(m, "etl_step_duration_seconds_bucket", le="0.5", **clean) == 1
    assert value(m, "etl_step_duration_seconds_bucket", le="+Inf", **clean) == 1
    assert value(m, "etl_step_retries_total", **clean) == 1
    assert by_label(m, "etl_steps_total", "status", **read) == {"succeeded": 1}
    assert by_label(m, "etl_steps_total", "status", **clean) == {"failed": 1}
    assert by_label(m, "etl_records_total", "kind", **read) == {"in": 10, "out": 8, "rejected": 2}
    # a failed step's records in and rejects count; its records out were never published
    assert by_label(m, "etl_records_total", "kind", **clean) == {"in": 8, "rejected": 3}
    assert value(m, "etl_schedule_fires_total", pipeline="beta", outcome="admitted") == 1
    assert value(m, "etl_schedule_fires_total", pipeline="alpha", outcome="skipped") == 1
    assert 90 <= value(m, "etl_oldest_queued_run_age_seconds") < 3600
    ages = by_label(m, "etl_executor_heartbeat_age_seconds", "executor")
    assert set(ages) == {"executor-1", "executor-2"}  # stopped and hour-old ones are gone
    assert 1 < ages["executor-1"] < 30 < ages["executor-2"] < 120
    assert value(m, "etl_executors_up") == 1


def test_every_metric_on_known_states_needs_no_token(api: Api) -> None:
    _seed_known_states(api)
    answer = api.client.simulate_get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=")
    before = parse(answer.text)
    _check_known_states(before)
    (pending,) = api.sql("SELECT count(*) FROM metric_deltas")[0]
    assert pending > 0
    conn = connect(api.db_url, "etl-test-fold")
    try:
        fold_metric_deltas(conn)
        fold_metric_deltas(conn)  # nothing left: folding again changes nothing
    finally:
        conn.close()
    assert api.sql("SELECT count(*) FROM metric_deltas") == [(0,)]
    after = parse(api.client.simulate_get("/metrics").text)
    _check_known_states(after)
    moving = ("etl_oldest_queued_run_age_seconds", "etl_executor_heartbeat_age_seconds")
    assert {k: v for k, v in after.items() if k[0] not in moving} == {
        k: v for k, v in before.items() if k[0] not in moving
    }


def test_a_deleted_pipeline_leaves_the_metrics_and_its_name_starts_from_zero(api: Api) -> None:
    pid = api.create_pipeline("gamma")
    ((run_id,),) = api.sql(
        "INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id, created_by)"
        " VALUES (gen_random_uuid(), %s, 1, 'queued', 'k', 't', 'test') RETURNING id",
        (pid,),
    )
    api.sql("UPDATE runs SET status = 'running', started_at = now() WHERE id = %s", (run_id,))
    api.sql("UPDATE runs SET status = 'succeeded', finished_at = now() WHERE id = %s", (run_id,))
    m = parse(api.client.simulate_get("/metrics").text)
    assert value(m, "etl_runs_total", pipeline="gamma", status="succeeded") == 1
    assert api.call("DELETE", f"/pipelines/{pid}").status == 204
    m = parse(api.client.simulate_get("/metrics").text)
    assert not [k for k in m if ("pipeline", "gamma") in k[1]]
    api.create_pipeline("gamma")
    m = parse(api.client.simulate_get("/metrics").text)
    assert value(m, "etl_runs_total", pipeline="gamma", status="succeeded") == 0
    assert ("etl_runs_total", frozenset({("pipeline", "gamma"), ("status", "succeeded")})) in m
    assert value(m, "etl_run_duration_seconds_count", pipeline="gamma") == 0


def test_without_a_database_the_scrape_says_so(app_factory) -> None:
    dead = app_factory(db=Database("postgresql://postgres@127.0.0.1:1/nowhere"))
    answer = dead.client.simulate_get("/metrics")
    assert answer.status_code == 200
    assert parse(answer.text) == {("etl_database_up", frozenset()): 0.0}


# --- after real runs -------------------------------------------------------------------------


def _scrape(stack: Stack) -> tuple[str, Samples]:
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return text, parse(text)


def _check_against_sql(stack: Stack, m: Samples) -> None:
    """Every kept counter equals the SQL count of the rows it counts."""
    runs = dict(stack.sql("SELECT status, count(*) FROM runs GROUP BY status"))
    assert runs == {"succeeded": 2, "failed": 1}
    assert {s: total(m, "etl_runs_total", status=s) for s in runs} == runs
    assert total(m, "etl_runs_total", status="canceled") == 0
    attempts = dict(
        stack.sql("SELECT outcome, count(*) FROM attempts WHERE outcome IS NOT NULL GROUP BY 1")
    )
    assert attempts["input_error"] >= 1 and attempts["succeeded"] == 16
    assert {o: total(m, "etl_attempts_total", outcome=o) for o in attempts} == attempts
    steps = dict(
        (name, (n, rin, rout, rej))
        for name, n, rin, rout, rej in stack.sql(
            "SELECT p.name || '.' || s.name, count(*), sum(records_in), sum(records_out),"
            " sum(rejected) FROM step_runs s JOIN runs r ON r.id = s.run_id"
            " JOIN pipelines p ON p.id = r.pipeline_id WHERE s.status = 'succeeded' GROUP BY 1"
        )
    )
    assert sum(n for n, *_ in steps.values()) == 16
    for key, (n, rin, rout, rej) in steps.items():
        pipeline, step = key.split(".", 1)
        labels = {"pipeline": pipeline, "step": step}
        assert value(m, "etl_step_duration_seconds_count", **labels) == n
        assert value(m, "etl_steps_total", status="succeeded", **labels) == n
        assert by_label(m, "etl_records_total", "kind", **labels) == {
            k: v for k, v in {"in": rin, "out": rout, "rejected": rej}.items() if v
        }
    assert total(m, "etl_records_total", kind="rejected") > 0
    (last,) = stack.sql(
        "SELECT extract(epoch FROM max(finished_at))::float8 FROM runs WHERE status = 'succeeded'"
    )
    assert value(
        m, "etl_pipeline_last_success_timestamp_seconds", pipeline="demo"
    ) == pytest.approx(last[0])
    assert value(m, "etl_run_duration_seconds_count", pipeline="demo") == 2
    assert value(m, "etl_run_duration_seconds_count", pipeline="broken") == 1
    assert by_label(m, "etl_active_leases", "executor") == {}
    assert by_label(m, "etl_queue_depth", "pipeline") == {}
    assert value(m, "etl_oldest_queued_run_age_seconds") == 0


def _run_demo_and_broken(stack: Stack, tmp_path: Path) -> None:
    demo = json.loads((ROOT / "fixtures" / "plans" / "demo.json").read_text())
    broken = json.loads(json.dumps(demo))
    broken["name"], broken["plan"]["steps"][0]["config"]["path"] = "broken", "missing.csv"
    env = {**stack.env, "ETL_TOKEN": ADMIN_TOKEN}
    for doc, expected in ((demo, 0), (broken, 1), (demo, 0)):
        path = tmp_path / f"{doc['name']}.json"
        path.write_text(json.dumps(doc))
        for args in (["pipelines", "apply", str(path)], ["run", doc["name"], "--wait"]):
            done = subprocess.run(
                [sys.executable, "-m", "service", *args],
                env=env, cwd=ROOT, capture_output=True, text=True, timeout=180,
            )  # fmt: skip
            assert done.returncode == (expected if args[0] == "run" else 0), done.stderr


def _prometheus_query(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as resp:
        answer = json.loads(resp.read())
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def _scraped_yet(port: int, expr: str) -> list[dict] | None:
    """The query's result once the server answers and has scraped; None before."""
    try:
        return _prometheus_query(port, expr) or None
    except OSError:  # not listening yet
        return None


def test_scraped_values_match_sql_counts_after_real_runs_and_a_purge(
    demo_stack: Stack, tmp_path: Path
) -> None:
    _run_demo_and_broken(demo_stack, tmp_path)
    text, m = _scrape(demo_stack)
    _check_against_sql(demo_stack, m)

    # Clean under the Prometheus project's own linter.
    lint = subprocess.run(
        [program("promtool"), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert lint.returncode == 0 and not lint.stdout.strip() and not lint.stderr.strip(), (
        lint.stdout + lint.stderr
    )

    # A purge removes the runs' intermediate outputs; no counter moves.
    conn = connect(demo_stack.db_url, "etl-test-purge")
    try:
        purged = purge_finished_runs(
            conn,
            older_than_s=0,
            export_dir=demo_stack.exports,
            reject_dir=demo_stack.rejects,
            connect_sandbox=lambda: connect(demo_stack.db_url, "etl-test-sandbox"),
            limit=100,
        )
    finally:
        conn.close()
    assert len(purged.runs) == 3
    _, again = _scrape(demo_stack)
    _check_against_sql(demo_stack, again)
    counters = {  # of the runs (requests and the processes' CPU go on, scrapes included)
        k: v
        for k, v in m.items()
        if k[0].endswith(("_total", "_count", "_sum", "_bucket"))
        and not k[0].startswith(("etl_api_request", "process_"))
    }
    assert counters and {k: again[k] for k in counters} == counters


def test_a_real_prometheus_server_scrapes_it(demo_stack: Stack, tmp_path: Path) -> None:
    """Prometheus (the system's server) scrapes /metrics every 2 s; its queries see the runs,
    and the target is healthy."""
    _run_demo_and_broken(demo_stack, tmp_path)
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 2s, scrape_timeout: 2s}\n"
        "scrape_configs:\n"
        "  - job_name: etl\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{demo_stack.port}']}}]\n"
    )
    server = subprocess.Popen(
        [
            program("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("w"),
    )
    try:
        wait_until(
            lambda: _scraped_yet(port, 'etl_runs_total{pipeline="demo",status="succeeded"}'),
            timeout=60,
            what="Prometheus to scrape the platform",
        )
        (ok,) = _prometheus_query(port, 'etl_runs_total{pipeline="demo",status="succeeded"}')
        assert float(ok["value"][1]) == 2
        (failed,) = _prometheus_query(port, 'sum(etl_runs_total{status="failed"})')
        assert float(failed["value"][1]) == 1
        (up,) = _prometheus_query(port, 'up{job="etl"}')
        assert float(up["value"][1]) == 1
        (health,) = _prometheus_query(port, "scrape_samples_post_metric_relabeling")
        assert float(health["value"][1]) > 50
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_executor_liveness_follows_real_executors(demo_stack: Stack) -> None:
    """Both executors are up and beating; one killed with SIGKILL stops beating, its age
    grows past the lease and it no longer counts as up; a clean stop removes its series.
    The coordinator's and each executor's `process_*` values are there, each its own, and
    a clean stop takes an executor's out."""

    def scrape() -> Samples:
        return _scrape(demo_stack)[1]

    wait_until(
        lambda: value(scrape(), "etl_executors_up") == 2 or None, timeout=30, what="2 executors up"
    )
    ages = by_label(scrape(), "etl_executor_heartbeat_age_seconds", "executor")
    assert set(ages) == {"executor-1", "executor-2"}
    _each_process_reports_its_own_values(scrape())
    demo_stack.kill("executor-1")
    # the snapshot that says so (a body is up to a second old, and each worker has its own)
    down = wait_until(
        lambda: m if value(m := scrape(), "etl_executors_up") == 1 else None,
        timeout=30,
        what="1 executor up",
    )
    ages = by_label(down, "etl_executor_heartbeat_age_seconds", "executor")
    assert ages["executor-1"] > 3  # past the lease TTL of the test timings
    demo_stack.kill("executor-2", 15)
    gone = wait_until(
        lambda: (
            m
            if "executor-2"
            not in by_label(m := scrape(), "etl_executor_heartbeat_age_seconds", "executor")
            else None
        ),
        timeout=60,
        what="the stopped executor's series to go",
    )
    assert value(gone, "etl_executors_up") == 0
    gone = wait_until(
        lambda: m if "executor-2" not in _processes(m := scrape()) else None,
        timeout=30,
        what="the stopped executor's process values to go",
    )
    assert "coordinator" in _processes(gone)


def _processes(m: Samples) -> dict[str, float]:
    return by_label(m, "process_resident_memory_bytes", "process")


def _each_process_reports_its_own_values(m: Samples) -> None:
    memory = _processes(m)
    assert set(memory) == {"coordinator", "executor-1", "executor-2"}
    assert min(memory.values()) > 10 * 2**20  # a Python process with its imports
    roles = by_label(m, "process_open_fds", "role")
    assert set(roles) == {"coordinator", "executor"}
    starts = by_label(m, "process_start_time_seconds", "process")
    assert set(starts) == set(memory)
    assert time.time() - 600 < min(starts.values()) <= max(starts.values()) <= time.time()
    cpu = by_label(m, "process_cpu_seconds_total", "process")
    assert set(cpu) == set(memory) and min(cpu.values()) > 0


def test_scrapers_within_a_second_share_one_read_of_the_database(app_factory) -> None:
    # Regression: every scrape read the database, so a few anonymous scrapers slowed every
    # API call (p50 1.29 s with 6). One read a second per process now, whoever scrapes.
    reads: list[int] = []

    class CountedDatabase(Database):
        def transaction(self):  # the same transactions, counted
            reads.append(1)
            return super().transaction()

    counted = CountedDatabase(app_factory().db_url)
    try:
        api = app_factory(db=counted, metrics_max_age_s=1.0)
        bodies: list[str] = []
        scrapers = [
            threading.Thread(
                target=lambda: bodies.extend(
                    api.client.simulate_get("/metrics").text for _ in range(5)
                )
            )
            for _ in range(6)
        ]
        for t in scrapers:
            t.start()
        for t in scrapers:
            t.join(30)
        assert len(bodies) == 30 and len(set(bodies)) == 1
        assert len(reads) == 1
        time.sleep(1.1)
        api.client.simulate_get("/metrics")
        assert len(reads) == 2  # older than a second: read again
    finally:
        counted.close()


def test_api_requests_by_method_route_template_and_status(app_factory, db_url: str) -> None:
    """Each worker adds its requests to the database's totals (on its next request a second
    later, or a scrape it serves), so any worker's scrape reports every worker's."""
    pools = [Database(db_url, max_connections=1) for _ in range(2)]
    try:
        one, other = (app_factory(request_totals=RequestTotals(pool)) for pool in pools)
        pid = one.create_pipeline("histogram")
        for _ in range(3):
            assert one.call("GET", f"/pipelines/{pid}").status == 200
        assert one.call("GET", "/pipelines/00000000-0000-0000-0000-000000000000").status == 404
        assert one.client.simulate_get("/api/v1/nowhere").status_code == 404
        one.client.simulate_get("/metrics")  # adds this worker's requests
        m = parse(other.client.simulate_get("/metrics").text)
    finally:
        for pool in pools:
            pool.close()
    name = "etl_api_request_duration_seconds"
    route = "/api/v1/pipelines/{pipeline_id:uuid}"  # falcon's template, as routed
    assert value(m, f"{name}_count", method="GET", route=route, status="200") == 3
    assert value(m, f"{name}_bucket", method="GET", route=route, status="200", le="+Inf") == 3
    assert 0 < value(m, f"{name}_sum", method="GET", route=route, status="200") < 60
    assert value(m, f"{name}_count", method="GET", route=route, status="404") == 1
    assert value(m, f"{name}_count", method="POST", route="/api/v1/pipelines", status="201") == 1
    assert value(m, f"{name}_count", method="GET", route="(no route)", status="404") == 1
    buckets = by_label(m, f"{name}_bucket", "le", method="GET", route=route, status="200")
    assert list(buckets.values()) == sorted(buckets.values())  # cumulative
