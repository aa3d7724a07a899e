"""Admission under real concurrency: a gunicorn with 3 worker processes (the command
`etl api` runs), many threads released at once by a barrier. The limits must hold exactly
and the database must agree with every answer."""

from __future__ import annotations

from collections import Counter
from typing import Any

from dag import GLOBAL_ACTIVE_LIMIT, PIPELINE_ACTIVE_LIMIT
from drills import concurrently, run_sql
from tests.integration.testapp import API_WORKERS, plan_copy
from tests.integration.testapp import request_json as _request


def _burst(calls: list[tuple[str, str, Any]], base: str) -> list[tuple[int, Any]]:
    """Send every call from its own thread, all released together."""
    return concurrently([lambda c=c: _request(base, *c) for c in calls])


def test_thirty_simultaneous_triggers_respect_both_limits(server: str, db_url: str) -> None:
    pipelines = []
    for i in range(8):
        status, body = _request(
            server, "POST", "/pipelines", {"name": f"c{i}", "plan": plan_copy()}
        )
        assert status == 201
        pipelines.append(body["id"])
    # Uneven on purpose: the busiest pipelines overflow their queue, the rest hit the 20.
    spread = [8, 6, 4, 4, 2, 2, 2, 2]
    calls = [
        ("POST", f"/pipelines/{pid}/runs", {"trigger_key": f"burst-{n}-{k}"})
        for n, (pid, count) in enumerate(zip(pipelines, spread, strict=True))
        for k in range(count)
    ]
    answers = _burst(calls, server)

    outcomes = Counter(
        "created" if status == 201 else f"{status} {body['status']} {body['reason']}"
        for status, body in answers
    )
    print(f"\nburst of {len(calls)} triggers over {API_WORKERS} workers: {dict(outcomes)}")
    assert sum(outcomes.values()) == 30
    assert set(outcomes) <= {"created", "429 skipped queue_full", "429 skipped busy"}
    # 24 runs fit the per-pipeline limits, so the global limit decides: exactly 20.
    assert outcomes["created"] == GLOBAL_ACTIVE_LIMIT
    admitted = Counter(body["pipeline_id"] for status, body in answers if status == 201)
    assert max(admitted.values()) <= PIPELINE_ACTIVE_LIMIT

    # The database agrees with every answer ...
    rows = run_sql(
        db_url,
        "SELECT id::text, pipeline_id::text, status, reason FROM runs ORDER BY queue_seq",
    )
    assert len(rows) == 30
    by_id = {body["id"]: (status, body) for status, body in answers}
    for run_id, _, status, reason in rows:
        answer_status, body = by_id[run_id]
        assert (body["status"], body["reason"]) == (status, reason)
        assert answer_status == (201 if status == "queued" else 429)
    # ... and replaying the admissions in commit order gives the same decisions.
    active: Counter[str] = Counter()
    for _, pipeline_id, status, reason in rows:
        if active[pipeline_id] >= PIPELINE_ACTIVE_LIMIT:
            expected = ("skipped", "queue_full")
        elif sum(active.values()) >= GLOBAL_ACTIVE_LIMIT:
            expected = ("skipped", "busy")
        else:
            expected = ("queued", None)
            active[pipeline_id] += 1
        assert (status, reason) == expected
    # One dag-advancer wake-up per admitted run, through the real broker.
    woken = run_sql(db_url, "SELECT message->'args'->>0 FROM dramatiq.queue")
    assert sorted(r[0] for r in woken) == sorted(
        body["id"] for status, body in answers if status == 201
    )


def test_fifty_simultaneous_requests_with_one_key_create_one_run(server: str, db_url: str) -> None:
    status, body = _request(server, "POST", "/pipelines", {"name": "once", "plan": plan_copy()})
    assert status == 201
    path = f"/pipelines/{body['id']}/runs"
    answers = _burst([("POST", path, {"trigger_key": "the-one"})] * 50, server)
    statuses = Counter(status for status, _ in answers)
    print(f"\n50 identical triggers: {dict(statuses)}")
    assert statuses == {201: 1, 200: 49}
    assert len({body["id"] for _, body in answers}) == 1
    assert run_sql(db_url, "SELECT count(*) FROM runs") == [(1,)]
    assert run_sql(db_url, "SELECT count(*) FROM dramatiq.queue") == [(1,)]
