"""Readiness under the failure policies, cancel and resume (dag.readiness).

Hypothesis settings: max_examples=200, deadline=None (see SETTINGS).
"""

from __future__ import annotations

import itertools
from types import MappingProxyType

import pytest

from dag.plan import Plan, Step
from dag.readiness import (
    STEP_STATUSES,
    Readiness,
    decide,
    steps_to_rerun,
)
from tests.unit.dag.dags import (
    CONTINUE,
    EDGES,
    STOP,
    apply,
    make_plan,
    states,
)

# --- the happy path ------------------------------------------------------------------------------


def test_fresh_run_starts_the_roots() -> None:
    decision = decide(make_plan(EDGES), states())
    assert decision == Readiness(ready=("read", "other"), finished=False, run_status=None)


def test_ready_once_every_dependency_succeeded() -> None:
    plan = make_plan(EDGES)
    decision = decide(plan, states(read="succeeded", clean="succeeded", other="running"))
    assert decision.ready == ("to_table", "to_file")
    assert not decision.finished


def test_join_waits_for_every_dependency() -> None:
    plan = make_plan({"a": [], "b": [], "j": ["a", "b"]})
    assert decide(plan, {"a": "succeeded", "b": "running", "j": "pending"}).ready == ()
    assert decide(plan, {"a": "succeeded", "b": "retry_wait", "j": "pending"}).ready == ()
    assert decide(plan, {"a": "succeeded", "b": "succeeded", "j": "pending"}).ready == ("j",)


def test_running_and_retry_wait_are_not_ready_again() -> None:
    decision = decide(make_plan(EDGES), states(read="running", other="retry_wait"))
    assert decision.ready == ()
    assert not decision.finished


def test_all_succeeded_finishes_succeeded() -> None:
    decision = decide(make_plan(EDGES), dict.fromkeys(EDGES, "succeeded"))
    assert decision == Readiness(finished=True, run_status="succeeded")


# --- continue_independent ------------------------------------------------------------------------


def test_continue_independent_fails_dependents_transitively_in_one_call() -> None:
    plan = make_plan(EDGES, CONTINUE)
    decision = decide(plan, states(read="failed"))
    assert decision.upstream_failed == ("clean", "to_table", "to_file")
    assert decision.ready == ("other",)
    assert decision.not_run == ()
    assert not decision.finished


def test_continue_independent_finishes_failed_after_the_other_branch() -> None:
    plan = make_plan(EDGES, CONTINUE)
    settled = apply(states(read="failed"), decide(plan, states(read="failed")))
    settled |= {"other": "succeeded", "other_out": "succeeded"}
    decision = decide(plan, settled)
    assert decision == Readiness(finished=True, run_status="failed")


def test_independent_step_of_a_diamond_still_runs() -> None:
    plan = make_plan({"r": [], "a": ["r"], "b": ["r"], "a2": ["a"], "j": ["a2", "b"]}, CONTINUE)
    decision = decide(
        plan, {"r": "succeeded", "a": "failed", "b": "pending", "a2": "pending", "j": "pending"}
    )
    assert decision.upstream_failed == ("a2", "j")
    assert decision.ready == ("b",)


# --- stop_dependents -----------------------------------------------------------------------------


def test_stop_dependents_settles_everything_pending() -> None:
    plan = make_plan(EDGES, STOP)
    decision = decide(plan, states(read="failed"))
    # Dependents of the failure are upstream_failed; the rest never starts.
    assert decision.upstream_failed == ("clean", "to_table", "to_file")
    assert decision.not_run == ("other", "other_out")
    assert decision.ready == ()
    assert decision == Readiness(
        upstream_failed=("clean", "to_table", "to_file"),
        not_run=("other", "other_out"),
        finished=True,
        run_status="failed",
    )


def test_stop_dependents_lets_running_and_retry_wait_finish() -> None:
    plan = make_plan(EDGES, STOP)
    current = states(
        read="succeeded", clean="succeeded", to_table="failed", to_file="running", other="running"
    )
    decision = decide(plan, current)
    assert decision.ready == ()
    # other_out waits for `other`: its label depends on how `other` ends.
    assert decision.transitions() == {}
    assert not decision.finished
    later = current | {"to_file": "succeeded", "other": "retry_wait"}
    assert decide(plan, later) == Readiness()


def test_stop_dependents_step_after_a_running_step_that_commits_is_not_run() -> None:
    plan = make_plan(EDGES, STOP)
    current = states(
        read="succeeded",
        clean="succeeded",
        to_table="failed",
        to_file="succeeded",
        other="succeeded",
    )
    assert decide(plan, current) == Readiness(
        not_run=("other_out",), finished=True, run_status="failed"
    )


def test_stop_dependents_step_after_a_running_step_that_fails_is_upstream_failed() -> None:
    # Two failures in flight at once: the second one's dependents still end upstream_failed.
    plan = make_plan(EDGES, STOP)
    current = states(
        read="succeeded", clean="succeeded", to_table="failed", to_file="succeeded", other="failed"
    )
    assert decide(plan, current) == Readiness(
        upstream_failed=("other_out",), finished=True, run_status="failed"
    )


def test_stop_dependents_a_stopped_dependency_is_not_a_failure() -> None:
    plan = make_plan({"a": [], "b": [], "c": ["b"], "d": ["c", "a"]}, STOP)
    decision = decide(plan, {"a": "failed", "b": "succeeded", "c": "not_run", "d": "pending"})
    assert decision.upstream_failed == ("d",)  # d depends on the failed a
    decision = decide(
        plan, {"a": "succeeded", "b": "failed", "c": "upstream_failed", "d": "pending"}
    )
    assert decision.upstream_failed == ("d",)
    plan = make_plan({"a": [], "b": [], "c": ["b"]}, STOP)
    decision = decide(plan, {"a": "failed", "b": "not_run", "c": "pending"})
    assert decision.not_run == ("c",)


def test_stop_dependents_without_a_failure_runs_normally() -> None:
    plan = make_plan(EDGES, STOP)
    assert decide(plan, states(read="succeeded")).ready == ("clean", "other")


@pytest.mark.parametrize("policy", [STOP, CONTINUE])
@pytest.mark.parametrize("blocking", ["failed", "upstream_failed", "canceled", "not_run"])
def test_every_blocking_status_fails_the_dependents(policy: str, blocking: str) -> None:
    plan = make_plan({"a": [], "b": ["a"], "c": ["b"]}, policy)
    decision = decide(plan, {"a": blocking, "b": "pending", "c": "pending"})
    assert decision.upstream_failed == ("b", "c")
    assert decision.ready == ()
    assert decision.finished


def test_propagation_does_not_depend_on_plan_order() -> None:
    # A hand-built plan listed dependents first: one call still settles the whole chain.
    plan = Plan(
        steps=(
            Step("c", "transform", {}, ("b",)),
            Step("b", "transform", {}, ("a",)),
            Step("a", "ingest", {}),
        ),
        on_failure=CONTINUE,
    )
    decision = decide(plan, {"a": "failed", "b": "pending", "c": "pending"})
    assert decision.upstream_failed == ("c", "b")
    assert decision.finished


# --- cancel --------------------------------------------------------------------------------------


def test_cancel_settles_pending_and_retry_wait_and_leaves_running() -> None:
    plan = make_plan(EDGES, CONTINUE)
    current = states(read="succeeded", clean="running", other="retry_wait")
    decision = decide(plan, current, cancel_requested=True)
    assert decision.ready == ()
    assert decision.canceled == ("to_table", "to_file", "other", "other_out")
    assert decision.upstream_failed == () and decision.not_run == ()
    assert not decision.finished
    # The running step stops at its next batch boundary and records itself canceled.
    later = apply(current, decision) | {"clean": "canceled"}
    assert decide(plan, later, cancel_requested=True) == Readiness(
        finished=True, run_status="canceled"
    )


def test_cancel_of_a_fresh_run() -> None:
    decision = decide(make_plan(EDGES), states(), cancel_requested=True)
    assert decision.canceled == tuple(EDGES)
    assert decision.finished and decision.run_status == "canceled"


def test_cancel_after_every_step_ended_changes_nothing() -> None:
    done = dict.fromkeys(EDGES, "succeeded")
    assert decide(make_plan(EDGES), done, cancel_requested=True) == Readiness(
        finished=True, run_status="succeeded"
    )


def test_canceled_wins_over_failed_in_the_run_status() -> None:
    current = states(
        read="failed",
        clean="canceled",
        to_table="canceled",
        to_file="canceled",
        other="succeeded",
        other_out="canceled",
    )
    assert decide(make_plan(EDGES), current).run_status == "canceled"


# --- input checks --------------------------------------------------------------------------------


def test_decide_does_not_mutate_its_inputs() -> None:
    plan = make_plan(EDGES)
    current = states(read="failed")
    snapshot = dict(current)
    decide(plan, MappingProxyType(current))
    decide(plan, current, cancel_requested=True)
    assert current == snapshot


def test_unknown_status_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown status 'done'"):
        decide(make_plan(EDGES), states(read="done"))


def test_missing_state_is_rejected() -> None:
    current = states()
    del current["clean"]
    with pytest.raises(ValueError, match="no state for step 'clean'"):
        decide(make_plan(EDGES), current)
    with pytest.raises(ValueError, match="no state for step 'clean'"):
        steps_to_rerun(make_plan(EDGES), current)


def test_states_of_other_steps_are_ignored() -> None:
    assert decide(make_plan(EDGES), states() | {"ghost": "failed"}).ready == ("read", "other")


def test_transitions() -> None:
    decision = Readiness(ready=("r",), upstream_failed=("a",), not_run=("b",), canceled=("c",))
    assert decision.transitions() == {"a": "upstream_failed", "b": "not_run", "c": "canceled"}


# --- every run ends ------------------------------------------------------------------------------


def test_a_fused_follower_waiting_for_a_retry_ends_with_its_failed_head() -> None:
    # `to_table` failed inside the attempt of `read`, then `read` failed for good
    for policy in (STOP, CONTINUE):
        current = states(read="failed", clean="pending", to_table="retry_wait", to_file="pending")
        decision = decide(make_plan(EDGES, policy), current, due_retries={"to_table"})
        assert decision.retries == ()
        changes = decision.transitions()
        assert changes["to_table"] == changes["clean"] == "upstream_failed", policy


def test_a_due_retry_waits_for_its_upstream_then_starts() -> None:
    current = states(read="running", clean="running", to_table="retry_wait")
    waiting = decide(make_plan(EDGES), current, due_retries={"to_table"})
    assert (waiting.retries, waiting.transitions()) == ((), {})
    current |= {"read": "succeeded", "clean": "succeeded"}
    assert decide(make_plan(EDGES), current, due_retries={"to_table"}).retries == ("to_table",)
    assert decide(make_plan(EDGES), current).retries == ()  # not due yet


def test_a_frozen_run_stops_a_retry_whose_upstream_will_not_run() -> None:
    # stop_dependents after a failure elsewhere: `clean` never starts, so `to_table` never can
    current = states(read="succeeded", clean="pending", to_table="retry_wait", other="failed")
    decision = decide(make_plan(EDGES), current, due_retries={"to_table"})
    assert decision.transitions() == {
        "clean": "not_run",
        "to_table": "not_run",
        "to_file": "not_run",
        "other_out": "upstream_failed",
    }
    assert decision.finished and decision.run_status == "failed"


# Shapes of fused groups: a chain with two exports, a fan-out, a join under a branch.
SHAPES = [
    EDGES,
    {"a": [], "b": ["a"], "c": ["b"], "d": ["b"], "e": ["a"]},
    {"a": [], "x": [], "b": ["a"], "c": ["b", "x"], "d": ["c"]},
]


@pytest.mark.parametrize("policy", [STOP, CONTINUE])
@pytest.mark.parametrize("edges", SHAPES, ids=["chain", "fan-out", "join"])
def test_no_combination_of_states_leaves_a_run_stuck(edges: dict, policy: str) -> None:
    """Every assignment of step states, with every retry due (time passes): once the
    decision is applied, the run is finished, something starts, or something still runs.
    Lease loss, cancel and the rest end in one of these states, so none can strand a run."""
    plan = make_plan(edges, policy)
    names = list(edges)
    for codes in itertools.product(range(len(STEP_STATUSES)), repeat=len(names)):
        current = {n: STEP_STATUSES[c] for n, c in zip(names, codes, strict=True)}
        for cancel in (False, True):
            waiting = {n for n, s in current.items() if s == "retry_wait"}
            decision = decide(plan, current, cancel_requested=cancel, due_retries=waiting)
            after = apply(current, decision)
            assert (
                decision.finished
                or decision.ready
                or decision.retries
                or "running" in after.values()
            ), (current, cancel, decision)


# --- resume --------------------------------------------------------------------------------------


def test_steps_to_rerun_keeps_succeeded_output() -> None:
    current = states(
        read="succeeded",
        clean="failed",
        to_table="upstream_failed",
        to_file="upstream_failed",
        other="succeeded",
        other_out="not_run",
    )
    assert steps_to_rerun(make_plan(EDGES), current) == (
        "clean",
        "to_table",
        "to_file",
        "other_out",
    )


def test_steps_to_rerun_includes_canceled_and_leaves_unfinished_alone() -> None:
    current = states(read="canceled", clean="running", to_table="retry_wait", other="succeeded")
    assert steps_to_rerun(make_plan(EDGES), current) == ("read",)


def test_resume_restarts_the_failed_step_only() -> None:
    plan = make_plan(EDGES, CONTINUE)
    failed = states(
        read="succeeded",
        clean="failed",
        to_table="upstream_failed",
        to_file="upstream_failed",
        other="succeeded",
        other_out="succeeded",
    )
    reset = failed | dict.fromkeys(steps_to_rerun(plan, failed), "pending")
    decision = decide(plan, reset)
    assert decision.ready == ("clean",)
    assert decision.transitions() == {}
