"""How an attempt ends: the fenced terminal transitions of its attempt row and its step.

Each starts with the attempt's fence in the caller's connection (those given a cursor run
inside the caller's fenced transaction), so a stale executor whose lease was taken over
records nothing: the transaction rolls back and the ending reports the lease lost instead. A fused
follower ends on its own (`leave`) while its group goes on; the followers of a group that
stops wait again for the claimed step's next attempt (`unfuse`), as do those a batch leaves
out to stay within the group's memory budget (`cut`)."""

from __future__ import annotations

import logging

from dramatiq.middleware.time_limit import TimeLimitExceeded

import connectors
from actors import lineage
from actors.errors import LeaseLost, StepTimeout
from actors.group import Member
from actors.leases import Claim, Heartbeat, fence
from actors.settings import ExecutorSettings
from actors.sql import QUERIES
from dag import (
    AttemptOutcome,
    RetryDecision,
    StepStatus,
    decide_retry,
    is_input_data_error,
    parse_plan,
)

log = logging.getLogger("etl.executor")
# What an ending answers when the fence found the attempt taken over (not an outcome).
LEASE_LOST = "lease_lost"


def finish(
    cur,
    claim: Claim,
    outcome: AttemptOutcome,
    error: str | None,
    *,
    step_status: StepStatus | None,
) -> None:
    """Record the attempt's outcome and, unless `step_status` is None, end its step with
    that status (if it still runs), inside the caller's fenced transaction."""
    cur.execute(
        QUERIES["finish_attempt"],
        {"attempt_id": claim.attempt_id, "outcome": outcome, "error": error},
    )
    if step_status is not None:
        _finish_step(cur, claim, step_status, error)


def _finish_step(cur, claim: Claim, status: StepStatus, error: str | None) -> None:
    cur.execute(
        QUERIES["finish_step"],
        {"run_id": claim.run_id, "name": claim.step_name, "status": status, "error": error},
    )


def end_canceled(conn, claim: Claim, error: str, settings: ExecutorSettings) -> None:
    """End an attempt that stops without a failure because its run was canceled: the
    attempt and its step end `canceled`. A lease taken over ends nothing."""
    s = settings
    try:
        with conn.cursor() as cur:
            fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
            finish(cur, claim, AttemptOutcome.CANCELED, error, step_status=StepStatus.CANCELED)
        conn.commit()
    except LeaseLost:
        conn.rollback()
        return
    lineage.steps_ended([claim], AttemptOutcome.CANCELED, error)


def release(
    conn,
    claim: Claim,
    followers: list[Claim],
    settings: ExecutorSettings,
    heartbeat: Heartbeat,
) -> int | None:
    """A stopping executor ends its attempt as `released` and creates the step's next
    attempt in the same transaction, so another executor continues from the checkpoint
    at once instead of after the lease TTL. Its fused followers wait again (pending) in
    that transaction too, so the next attempt finds them to adopt. Returns the next
    attempt's id (the caller wakes it), None when the lease was taken over."""
    s = settings
    try:
        with conn.cursor() as cur:
            fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
            why = "executor stopped"
            finish(cur, claim, AttemptOutcome.RELEASED, why, step_status=None)
            _unfuse_in(cur, followers, why, s, heartbeat)
            cur.execute(
                QUERIES["create_attempt"], {"run_id": claim.run_id, "name": claim.step_name}
            )
            next_attempt, _number = cur.fetchone()
        conn.commit()
    except LeaseLost:
        conn.rollback()
        return None
    lineage.steps_ended([claim, *followers], AttemptOutcome.RELEASED, why)
    return next_attempt


def unfuse(
    conn, followers: list[Claim], why: str, settings: ExecutorSettings, heartbeat: Heartbeat
) -> None:
    """Fused followers that stop with the member they hang off: their attempts end
    `released` and their steps wait again (pending), checkpoints kept; `heartbeat` stops
    extending their leases. One follower's lease taken over unfuses none of them."""
    if not followers:
        return
    try:
        with conn.cursor() as cur:
            _unfuse_in(cur, followers, why, settings, heartbeat)
        conn.commit()
    except LeaseLost:
        conn.rollback()
        return
    lineage.steps_ended(followers, AttemptOutcome.RELEASED, why)


def _unfuse_in(
    cur, followers: list[Claim], why: str, s: ExecutorSettings, heartbeat: Heartbeat
) -> None:
    """`unfuse` inside the caller's transaction."""
    for claim in followers:
        fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
        finish(cur, claim, AttemptOutcome.RELEASED, why, step_status=None)
        cur.execute(QUERIES["unfuse_step"], {"run_id": claim.run_id, "name": claim.step_name})
        heartbeat.unfollow(claim.attempt_id)


def fail(
    conn, claim: Claim, exc: BaseException, settings: ExecutorSettings
) -> tuple[str, int | None]:
    """Record a failed attempt: its step waits for a retry (`retry_wait`, the next delay)
    or fails for good. Returns the outcome and the retry delay in ms (None: no retry), or
    (LEASE_LOST, None) when the lease was taken over (nothing recorded)."""
    s = settings
    if is_input_data_error(exc):
        outcome = AttemptOutcome.INPUT_ERROR
    elif isinstance(exc, StepTimeout | TimeLimitExceeded):
        outcome = AttemptOutcome.TIMEOUT
    else:
        outcome = AttemptOutcome.FAILED
    error = f"{type(exc).__name__}: {exc}"
    try:
        with conn.cursor() as cur:
            fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
            decision = _record_failure(cur, claim, exc, outcome, error)
        conn.commit()
    except LeaseLost:
        conn.rollback()
        return LEASE_LOST, None
    lineage.steps_ended([claim], outcome, error)
    return outcome, (int(decision.delay_s * 1000) if decision.retry else None)


def _record_failure(
    cur, claim: Claim, exc: BaseException, outcome: AttemptOutcome, error: str
) -> RetryDecision:
    """`fail` behind the fence: decide the retry, end the attempt, then the step."""
    keys = {"run_id": claim.run_id, "name": claim.step_name}
    # the advancer's lock order (every step of the run, by position): the rows of the
    # steps below may change here too
    cur.execute(QUERIES["lock_step_runs"], keys)
    cur.execute(QUERIES["count_failed_attempts"], keys)
    (failed_before,) = cur.fetchone()
    cur.execute(QUERIES["get_run_plan"], keys)
    (plan_json,) = cur.fetchone()
    plan = parse_plan(plan_json)
    step = plan.step(claim.step_name)
    decision = decide_retry(exc, failed_before + 1, step.max_attempts)
    finish(cur, claim, outcome, error, step_status=None)
    if isinstance(exc, connectors.StagedOutputLost):
        # what its export staged is gone: the next attempt starts the step over
        cur.execute(QUERIES["restart_step"], keys)
    if decision.retry:
        cur.execute(QUERIES["wait_retry"], {**keys, "error": error, "delay_s": decision.delay_s})
    else:
        _finish_step(cur, claim, StepStatus.FAILED, error)
        # the followers that failed inside its attempt wait for a retry that cannot come
        below = sorted(plan.descendants(claim.step_name))
        cur.execute(QUERIES["end_waiting_dependents"], {**keys, "names": below})
    return decision


def leave(
    conn,
    group: list[Member],
    m: Member,
    exc: Exception,
    settings: ExecutorSettings,
    heartbeat: Heartbeat,
) -> list[Member]:
    """A fused follower `m` failed: its own attempt fails (retried from its checkpoint
    once its upstream succeeded, or the step fails), the members below it wait again, and
    the rest of the group goes on: returns the group without them. Raises LeaseLost when
    the follower's lease was taken over."""
    outcome, _ = fail(conn, m.claim, exc, settings)
    if outcome == LEASE_LOST:
        raise LeaseLost(f"attempt {m.claim.attempt_id} of fused step {m.name}")
    heartbeat.unfollow(m.claim.attempt_id)
    log.warning(
        "fused step left its group: %s",
        exc,
        extra={"run_id": m.claim.run_id, "step": m.name, "outcome": outcome},
    )
    below = [g for g in group if g is not m and g.below(m)]
    unfuse(conn, [g.claim for g in below], f"{m.name} failed", settings, heartbeat)
    for g in [m, *below]:
        if g.work is not None and g.work.sink is not None:
            g.work.sink.close()
            g.work.sink = None
    return [g for g in group if not g.below(m)]


def cut(
    conn,
    group: list[Member],
    out: list[Member],
    settings: ExecutorSettings,
    heartbeat: Heartbeat,
) -> list[Member]:
    """Fused followers left out of the group before the batch reaches them, to keep it
    within the group's memory budget (`group.over_budget`): they and what hangs off them
    wait again (`unfuse`: pending, checkpoints kept) and run after their upstream, reading
    its stored output, which the members they hung off store from this batch on. Returns
    the group without them."""
    gone = [g for g in group if any(g.below(m) for m in out)]
    unfuse(conn, [g.claim for g in gone], "fused group over its memory budget", settings, heartbeat)
    log.info(
        "fused steps left out of the group to stay within its memory budget",
        extra={"run_id": gone[0].claim.run_id, "steps": [g.name for g in gone]},
    )
    for g in gone:
        if g.work is not None and g.work.sink is not None:
            g.work.sink.close()
            g.work.sink = None
    rest = [g for g in group if g not in gone]
    for m in out:
        up = m.upstream
        if up in rest and up.work is not None and up.claim is not None and up.work.has_output:
            up.work.keep_output = True
            if up.done and up.out is not None and up.out.rows is not None:
                up.ctx.progress.output_kept = up.kept_before
    return rest
