"""The run page of a run whose fused group failed: the follower that never ran (its share of
the leader's attempt released, its status upstream_failed) has no bar of its own on the
timeline, as if it had run; the leader's bar shows the work."""

from __future__ import annotations

import re

from service.domain.principals import VIEWER
from tests.integration.service.console import test_pages

env = test_pages.env  # the fixture: a console on this test's database


def test_a_fused_step_that_never_ran_draws_no_bar(env: test_pages.Env) -> None:
    pid = env.create("fused")
    (run,) = env.sql(
        "INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id, created_by,"
        " started_at, finished_at) VALUES (gen_random_uuid(), %(p)s, 1, 'failed', 'k', 't',"
        " 'test', now() - interval '3 s', now()) RETURNING id",
        {"p": pid},
    )
    r = str(run["id"])
    env.sql(
        "INSERT INTO step_runs (run_id, name, type, position, status) VALUES"
        " (%(r)s, 'read', 'ingest', 0, 'failed'), (%(r)s, 'clean', 'transform', 1,"
        " 'upstream_failed'), (%(r)s, 'to_file', 'export', 2, 'upstream_failed'),"
        " (%(r)s, 'to_table', 'export', 3, 'upstream_failed')",
        {"r": r},
    )
    (leader,) = env.sql(
        "INSERT INTO attempts (run_id, step_name, number, executor, started_at, finished_at,"
        " outcome, error) VALUES (%(r)s, 'read', 1, 'executor-2:b', now() - interval '2 s',"
        " now(), 'input_error', 'bad') RETURNING id",
        {"r": r},
    )
    env.sql(
        "INSERT INTO attempts (run_id, step_name, number, fused_into, executor, started_at,"
        " finished_at, outcome) VALUES (%(r)s, 'clean', 1, %(l)s, 'executor-2:b',"
        " now() - interval '2 s', now(), 'released')",
        {"r": r, "l": leader["id"]},
    )
    page = env.browser(VIEWER).get(f"/ui/runs/{r}").text
    bars = re.findall(r'<g class="attempt outcome-[a-z_]+" data-step="([^"]+)"', page)
    assert bars == ["read"]


def test_a_resume_by_hand_is_labelled_so_on_the_timeline(env: test_pages.Env) -> None:
    pid = env.create("resumed")
    (run,) = env.sql(
        "INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id, created_by,"
        " started_at) VALUES (gen_random_uuid(), %(p)s, 1, 'running', 'k', 't', 'test',"
        " now() - interval '20 s') RETURNING id",
        {"p": pid},
    )
    r = str(run["id"])
    env.sql(
        "INSERT INTO step_runs (run_id, name, type, position, status) VALUES"
        " (%(r)s, 'read', 'ingest', 0, 'running'), (%(r)s, 'clean', 'transform', 1, 'pending'),"
        " (%(r)s, 'to_file', 'export', 2, 'pending'), (%(r)s, 'to_table', 'export', 3, 'pending')",
        {"r": r},
    )
    env.sql(
        "INSERT INTO attempts (run_id, step_name, number, executor, started_at, finished_at,"
        " outcome) VALUES (%(r)s, 'read', 1, 'executor-1:b', now() - interval '20 s',"
        " now() - interval '19 s', 'input_error'), (%(r)s, 'read', 2, 'executor-2:b',"
        " now() - interval '5 s', NULL, NULL)",
        {"r": r},
    )
    env.sql(
        "INSERT INTO audit (principal, action, entity_type, entity_id, details, created_at)"
        " VALUES ('admin', 'run.resume', 'run', %(r)s, '{\"outcome\": \"requeued\"}',"
        " now() - interval '6 s')",
        {"r": r},
    )
    page = env.browser(VIEWER).get(f"/ui/runs/{r}").text
    assert "(resumed by hand after 14." in page and "retry after" not in page
