"""Properties of readiness (hypothesis): ready steps have their dependencies, decide is a
fixpoint, resume re-runs exactly what has no output, and a simulated run always ends."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dag.plan import Plan
from dag.readiness import (
    STEP_STATUSES,
    TERMINAL_STATUSES,
    Readiness,
    decide,
    steps_to_rerun,
)
from tests.unit.dag.dags import (
    CONTINUE,
    SETTINGS,
    STOP,
    apply,
    make_plan,
)

# --- properties ----------------------------------------------------------------------------------


@st.composite
def dags(draw: st.DrawFn) -> Plan:
    """A random DAG of 1..30 steps (ingest roots), listed in a random order."""
    n = draw(st.integers(1, 30))
    names = [f"s{i}" for i in range(n)]
    edges: dict[str, list[str]] = {}
    for i, name in enumerate(names):
        root = i == 0 or draw(st.integers(0, 3)) == 0
        edges[name] = (
            []
            if root
            else draw(st.lists(st.sampled_from(names[:i]), min_size=1, max_size=3, unique=True))
        )
    order = draw(st.permutations(names))
    policy = draw(st.sampled_from([STOP, CONTINUE]))
    return make_plan({name: edges[name] for name in order}, policy)


@st.composite
def dags_with_states(draw: st.DrawFn) -> tuple[Plan, dict[str, str]]:
    plan = draw(dags())
    current = {s.name: draw(st.sampled_from(STEP_STATUSES)) for s in plan.steps}
    return plan, current


@SETTINGS
@given(dags_with_states(), st.booleans())
def test_ready_steps_have_every_dependency_succeeded(
    case: tuple[Plan, dict[str, str]], cancel: bool
) -> None:
    plan, current = case
    snapshot = dict(current)
    decision = decide(plan, current, cancel_requested=cancel)
    assert current == snapshot
    for name in decision.ready:
        assert current[name] == "pending"
        assert all(current[dep] == "succeeded" for dep in plan.step(name).depends_on)
    if cancel or (plan.on_failure == STOP and "failed" in current.values()):
        assert decision.ready == ()
    # Only steps that have not started are settled, and retry_wait ones on cancel or when
    # a dependency will never succeed.
    after = apply(current, decision)
    for name in decision.transitions():
        assert current[name] in ("pending", "retry_wait")
        if current[name] == "retry_wait" and not cancel:
            deps = {after[d] for d in plan.step(name).depends_on}
            assert deps & {"failed", "upstream_failed", "not_run", "canceled"}, name
    groups = [decision.ready, decision.upstream_failed, decision.not_run, decision.canceled]
    flat = [name for group in groups for name in group]
    assert len(flat) == len(set(flat))
    for group in groups:
        assert list(group) == [n for n in plan.step_names if n in group]


@SETTINGS
@given(dags_with_states(), st.booleans())
def test_decide_is_a_fixpoint(case: tuple[Plan, dict[str, str]], cancel: bool) -> None:
    plan, current = case
    first = decide(plan, current, cancel_requested=cancel)
    settled = apply(current, first)
    second = decide(plan, settled, cancel_requested=cancel)
    assert second.transitions() == {}
    assert second.ready == first.ready
    assert (second.finished, second.run_status) == (first.finished, first.run_status)
    frozen = not cancel and plan.on_failure == STOP and "failed" in settled.values()
    for step in plan.steps:
        if settled[step.name] != "pending":
            continue
        # Nothing pending is left behind a failure ...
        assert not any(
            settled[d] in ("failed", "upstream_failed", "canceled") for d in step.depends_on
        )
        if frozen:
            # ... and a frozen run keeps only what waits for a step still in flight.
            assert any(
                step.name in plan.descendants(n)
                for n, s in settled.items()
                if s in ("running", "retry_wait")
            )
        else:
            assert "not_run" not in {settled[d] for d in step.depends_on}
    assert first.finished == all(s in TERMINAL_STATUSES for s in settled.values())
    if first.finished:
        statuses = set(settled.values())
        if "canceled" in statuses:
            assert first.run_status == "canceled"
        elif statuses & {"failed", "upstream_failed", "not_run"}:
            assert first.run_status == "failed"
        else:
            assert first.run_status == "succeeded"


@SETTINGS
@given(dags_with_states())
def test_steps_to_rerun_never_includes_succeeded(case: tuple[Plan, dict[str, str]]) -> None:
    plan, current = case
    rerun = steps_to_rerun(plan, current)
    assert not any(current[name] == "succeeded" for name in rerun)
    assert set(rerun) == {
        n for n, s in current.items() if s in ("failed", "upstream_failed", "not_run", "canceled")
    }


@SETTINGS
@given(dags(), st.data())
def test_simulated_run_then_resume(plan: Plan, data: st.DataObject) -> None:
    """Drive a run like the advancer and the executors would; then resume it.

    Checks the policy end to end: nothing starts before its dependencies succeeded, nothing
    starts after a failure under stop_dependents, every descendant of a failure ends
    upstream_failed, and a resume re-runs exactly the steps without committed output.
    """
    current = dict.fromkeys(plan.step_names, "pending")
    started = _drive(plan, current, data, failures=True)
    failed = [n for n, s in current.items() if s == "failed"]
    for name in failed:
        for child in plan.descendants(name):
            assert current[child] == "upstream_failed"
    final = decide(plan, current)
    assert final.finished
    assert final.run_status == ("failed" if failed else "succeeded")
    if plan.on_failure == CONTINUE:
        # Every step not downstream of a failure ran to the end.
        blocked = set(failed).union(*(plan.descendants(n) for n in failed))
        assert all(current[n] == "succeeded" for n in plan.step_names if n not in blocked)

    succeeded_before = {n for n, s in current.items() if s == "succeeded"}
    rerun = steps_to_rerun(plan, current)
    assert set(rerun) == set(plan.step_names) - succeeded_before
    current |= dict.fromkeys(rerun, "pending")
    restarted = _drive(plan, current, data, failures=False)
    assert not set(restarted) & succeeded_before
    assert decide(plan, current) == Readiness(finished=True, run_status="succeeded")
    assert started  # the first run always starts at least one root


def _drive(
    plan: Plan, current: dict[str, str], data: st.DataObject, *, failures: bool
) -> list[str]:
    """Run to the end, finishing one running step per round; returns the steps started."""
    started: list[str] = []
    attempts: dict[str, int] = {}
    failed_once = False
    for _round in range(10 * len(plan.steps) + 10):
        waiting = {n for n, s in current.items() if s == "retry_wait"}  # every retry is due
        decision = decide(plan, current, due_retries=waiting)
        current |= decision.transitions()
        for name in decision.ready:
            assert all(current[d] == "succeeded" for d in plan.step(name).depends_on)
            assert not (plan.on_failure == STOP and failed_once), name
            current[name] = "running"
            started.append(name)
        for name in decision.retries:
            current[name] = "running"
        running = [n for n, s in current.items() if s == "running"]
        if not running:
            assert decision.finished or decide(plan, current).finished
            return started
        name = data.draw(st.sampled_from(running))
        attempts[name] = attempts.get(name, 0) + 1
        outcomes = ["succeeded"]
        if failures:
            outcomes += ["failed", "retry"] if attempts[name] < 3 else ["failed"]
        outcome = data.draw(st.sampled_from(outcomes))
        current[name] = "retry_wait" if outcome == "retry" else outcome
        failed_once = failed_once or outcome == "failed"
    raise AssertionError("the run did not finish")
