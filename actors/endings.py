"""How an attempt ends: the fenced terminal transitions of its attempt row and its step.

Every ending is one transaction, written once (`_end`): each attempt it ends is fenced
and its ending recorded behind its fence, the transaction commits, then the lineage event
is sent. A stale executor whose lease was taken over records nothing: the transaction
rolls back and the ending reports the lease lost instead. An attempt ends `succeed`,
`fail`, `end_canceled` or `release`. A fused follower ends on its own (`leave`) while its
group goes on; the followers of a group that stops wait again for the claimed step's next
attempt (`unfuse`), as do those a batch leaves out to stay within the group's memory
budget (`cut`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dramatiq.middleware.time_limit import TimeLimitExceeded

import connectors
from actors import lineage
from actors.errors import LeaseLost, StepTimeout
from actors.group import Group, Member
from actors.leases import Claim, Heartbeat, fence
from actors.outputs import write_batch
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
T = TypeVar("T")


def _end(
    conn,
    settings: ExecutorSettings,
    claims: Sequence[Claim],
    record: Callable[[Any, Claim], T],
    *,
    outcome: str,
    error: str | None,
) -> T | LeaseLost | None:
    """The one ending transaction: each of `claims`, in order, fenced and its ending
    recorded behind its fence (`record`); committed; then the lineage event of `outcome`.
    Returns what `record` returned for the first claim, or the LeaseLost a fence raised
    (rolled back: nothing recorded)."""
    s, first = settings, None
    try:
        with conn.cursor() as cur:
            for i, claim in enumerate(claims):
                fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
                got = record(cur, claim)
                first = got if i == 0 else first
        conn.commit()
    except LeaseLost as exc:
        conn.rollback()
        return exc
    lineage.steps_ended(claims, outcome, error)
    return first


def succeed(conn, group: Group, settings: ExecutorSettings) -> None:
    """The attempt's last transaction: each member with an attempt, behind its fence,
    stores its final batches and checkpoint and ends succeeded, its step with it. Raises
    LeaseLost when a lease was taken over (nothing recorded)."""
    members = {m.claim.attempt_id: m for m in group.members if m.claim is not None}

    def record(cur, claim: Claim) -> None:
        m = members[claim.attempt_id]
        progress = m.ctx.progress
        for n_records, rows in m.final:
            write_batch(cur, claim.run_id, m.name, progress.batches, n_records, rows)
            progress.batches += 1
        cur.execute(QUERIES["save_checkpoint"], progress.params(claim.run_id, m.name))
        _finish(cur, claim, AttemptOutcome.SUCCEEDED, None, step_status=StepStatus.SUCCEEDED)

    claims = [m.claim for m in members.values()]
    lost = _end(conn, settings, claims, record, outcome=AttemptOutcome.SUCCEEDED, error=None)
    if isinstance(lost, LeaseLost):
        raise lost


def fail(
    conn, claim: Claim, exc: BaseException, settings: ExecutorSettings
) -> tuple[str, int | None]:
    """Record a failed attempt: its step waits for a retry (`retry_wait`, the next delay)
    or fails for good. Returns the outcome and the retry delay in ms (None: no retry), or
    (LEASE_LOST, None) when the lease was taken over (nothing recorded)."""
    if is_input_data_error(exc):
        outcome = AttemptOutcome.INPUT_ERROR
    elif isinstance(exc, StepTimeout | TimeLimitExceeded):
        outcome = AttemptOutcome.TIMEOUT
    else:
        outcome = AttemptOutcome.FAILED
    error = f"{type(exc).__name__}: {exc}"

    def record(cur, claim: Claim) -> RetryDecision:
        return _record_failure(cur, claim, exc, outcome, error)

    decision = _end(conn, settings, [claim], record, outcome=outcome, error=error)
    if isinstance(decision, LeaseLost):
        return LEASE_LOST, None
    return outcome, (int(decision.delay_s * 1000) if decision.retry else None)


def end_canceled(conn, claim: Claim, error: str, settings: ExecutorSettings) -> None:
    """End an attempt that stops without a failure because its run was canceled: the
    attempt and its step end `canceled`. A lease taken over ends nothing."""

    def record(cur, claim: Claim) -> None:
        _finish(cur, claim, AttemptOutcome.CANCELED, error, step_status=StepStatus.CANCELED)

    _end(conn, settings, [claim], record, outcome=AttemptOutcome.CANCELED, error=error)


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
    why = "executor stopped"

    def record(cur, c: Claim) -> int | None:
        if c is not claim:
            _unfuse_one(cur, c, why, heartbeat)
            return None
        _finish(cur, claim, AttemptOutcome.RELEASED, why, step_status=None)
        cur.execute(QUERIES["create_attempt"], {"run_id": claim.run_id, "name": claim.step_name})
        next_attempt, _number = cur.fetchone()
        return next_attempt

    claims = [claim, *followers]
    got = _end(conn, settings, claims, record, outcome=AttemptOutcome.RELEASED, error=why)
    return None if isinstance(got, LeaseLost) else got


def unfuse(
    conn, followers: list[Claim], why: str, settings: ExecutorSettings, heartbeat: Heartbeat
) -> None:
    """Fused followers that stop with the member they hang off: their attempts end
    `released` and their steps wait again (pending), checkpoints kept; `heartbeat` stops
    extending their leases. One follower's lease taken over unfuses none of them."""
    if not followers:
        return

    def record(cur, claim: Claim) -> None:
        _unfuse_one(cur, claim, why, heartbeat)

    _end(conn, settings, followers, record, outcome=AttemptOutcome.RELEASED, error=why)


def leave(
    conn,
    group: Group,
    m: Member,
    exc: Exception,
    settings: ExecutorSettings,
    heartbeat: Heartbeat,
) -> None:
    """A fused follower `m` failed: its own attempt fails (retried from its checkpoint
    once its upstream succeeded, or the step fails), the members below it wait again, and
    the rest of the group goes on without them. Raises LeaseLost when the follower's lease
    was taken over."""
    outcome, _ = fail(conn, m.claim, exc, settings)
    if outcome == LEASE_LOST:
        raise LeaseLost(f"attempt {m.claim.attempt_id} of fused step {m.name}")
    heartbeat.unfollow(m.claim.attempt_id)
    log.warning(
        "fused step left its group: %s",
        exc,
        extra={"run_id": m.claim.run_id, "step": m.name, "outcome": outcome},
    )
    gone = group.below(m)
    below = [g.claim for g in gone if g is not m]
    unfuse(conn, below, f"{m.name} failed", settings, heartbeat)
    group.drop(gone)


def cut(
    conn,
    group: Group,
    out: list[Member],
    settings: ExecutorSettings,
    heartbeat: Heartbeat,
) -> None:
    """Fused followers left out of the group before the batch reaches them, to keep it
    within the group's memory budget (`Group.over_budget`): they and what hangs off them
    wait again (`unfuse`: pending, checkpoints kept) and run after their upstream, reading
    its stored output, which the members they hung off store from this batch on."""
    gone = [g for g in group.members if any(g.below(m) for m in out)]
    unfuse(conn, [g.claim for g in gone], "fused group over its memory budget", settings, heartbeat)
    log.info(
        "fused steps left out of the group to stay within its memory budget",
        extra={"run_id": gone[0].claim.run_id, "steps": [g.name for g in gone]},
    )
    group.drop(gone)
    group.store_for(out)


def _finish(
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


def _unfuse_one(cur, claim: Claim, why: str, heartbeat: Heartbeat) -> None:
    """One follower unfused, behind its fence in the caller's transaction: its attempt ends
    `released`, its step waits again (pending), `heartbeat` stops extending its lease."""
    _finish(cur, claim, AttemptOutcome.RELEASED, why, step_status=None)
    cur.execute(QUERIES["unfuse_step"], {"run_id": claim.run_id, "name": claim.step_name})
    heartbeat.unfollow(claim.attempt_id)


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
    _finish(cur, claim, outcome, error, step_status=None)
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
