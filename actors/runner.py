"""The executor's side of a step attempt: claim, run batch by batch, commit fenced.

For every input batch the executor computes the output, writes exports and reject rows (each
idempotent per batch number and invisible until the step commits), then commits the output
batch, the checkpoint (input position, counters, running digests, aggregate state) in ONE
transaction that starts with the lease fence. A crash re-runs only the unfinished batch; a
stale executor's commit changes nothing. That transaction is sent while the next batch is
computed (`actors.committer`); when the sandbox is the state database, a table export's
rows of the batch are staged in it too, and a commit that fails with them (a key another
batch staged, a row too big) sends the attempt back to its checkpoint to stage them batch
by batch, where a staging error is the export step's own (`StagingRefused`).

The claimed step runs with its fusion group (`actors.group`): every input batch goes through
all of its members in one pass; each member still commits its own checkpoint, counters and
digests, all in the batch's one transaction, so the members' checkpoints always fit
together and a group resumes as a group. A follower that fails leaves the group and the
others go on. How an attempt ends (failed, canceled, released) is `actors.endings`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import psycopg2
from dramatiq.middleware.time_limit import TimeLimitExceeded

from actors import lineage
from actors.checks import open_checks
from actors.committer import BatchCommitter, StepCommit
from actors.endings import LEASE_LOST, cut, end_canceled, fail, finish, leave, release, unfuse
from actors.errors import (
    ExecutorStopping,
    LeaseLost,
    StagingRefused,
    StepCanceled,
    StepTimeout,
)
from actors.group import (
    Member,
    check_replay,
    fed,
    followers,
    form_group,
    open_member,
    over_budget,
    release_taken,
)
from actors.leases import Claim, Heartbeat, claim_attempt, fence
from actors.memberpass import finish_member, process_batch
from actors.outputs import write_batch
from actors.progress import fresh_progress, load_context
from actors.recovery import RECONNECT_WAITS_S, take_back
from actors.settings import ExecutorSettings
from actors.sql import QUERIES
from actors.steps import InputBatch
from actors.tracing import AttemptSpans
from dag import AttemptOutcome, StepStatus
from ddl import connection_lost

__all__ = ["LEASE_LOST", "ExecutorSettings", "StepRunner"]

log = logging.getLogger("etl.executor")
MAX_TAKE_BACKS = 10  # per attempt: then the step is left to its lease


class StepRunner:
    """Runs step attempts for one executor process (one at a time)."""

    def __init__(
        self,
        settings: ExecutorSettings,
        *,
        connect_state: Callable[[], Any],
        connect_sandbox: Callable[[], Any],
        wake_run: Callable[[str, str, int | None], None],
        wake_attempt: Callable[[int, str], None],
        connect_commits: Callable[[], Any] | None = None,
        stopping: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`connect_commits` opens the asynchronous session the batches commit on while
        the next batch is computed (`ddl.connect(..., asynchronous=True)`); without it, or
        with `settings.overlap` off, each batch commits on the state connection and waits."""
        self.settings = settings
        self._committer = BatchCommitter(connect_commits if settings.overlap else None)
        self._defer_staging = False  # the running attempt stages table rows in its commits
        self._connect_state = connect_state
        self._connect_sandbox = connect_sandbox
        self._wake_run = wake_run
        self._wake_attempt = wake_attempt
        self.stopping = stopping or threading.Event()
        self._clock = clock
        self._conn = None
        self._group: list[Member] = []  # the running attempt's members, in order
        self._heartbeat: Heartbeat | None = None  # the running attempt's
        self._spans: AttemptSpans | None = None  # the running attempt's (`actors.tracing`)

    def _state_conn(self):
        if self._conn is None or self._conn.closed:
            self._conn = self._connect_state()
        return self._conn

    def _drop_state_conn(self) -> None:
        """Forget a connection whose session is gone (the next use opens a new one)."""
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg2.Error:
                pass
        self._conn = None

    def run_attempt(self, attempt_id: int) -> str | None:
        """Run attempt `attempt_id` if it is ours to run; return its outcome (None if it was
        not claimable, e.g. a duplicate or late wake-up)."""
        s = self.settings
        claim = self._claim(attempt_id)
        if claim is None:
            log.info("attempt not claimable", extra={"attempt_id": attempt_id})
            return None
        ctx = {
            "run_id": claim.run_id,
            "step": claim.step_name,
            "attempt": claim.number,
            "trace_id": claim.trace_id,
        }
        self._spans = AttemptSpans(claim, s.name)
        with self._spans.current():  # its log lines carry the attempt span's ids
            return self._run_attempt(claim, ctx)

    def _run_attempt(self, claim: Claim, ctx: dict) -> str:
        """The claimed attempt under its heartbeat, its spans ended with its outcome, the
        dag-advancer woken."""
        s, attempt_id = self.settings, claim.attempt_id
        log.info("attempt claimed", extra=ctx)
        lineage.steps_started([claim])
        heartbeat = Heartbeat(
            self._connect_state,
            attempt_id,
            s.owner,
            ttl_s=s.lease_ttl_s,
            interval_s=s.heartbeat_s,
            max_age_s=s.step_timeout_s + 2 * s.heartbeat_s,
        )
        self._group, self._heartbeat = [], heartbeat
        self._defer_staging = s.overlap and s.sandbox_in_state
        with heartbeat:
            outcome, delay_ms = self._run_claimed(claim, heartbeat, ctx)
        self._group, self._heartbeat = [], None
        self._spans.end(self._conn, outcome)
        if outcome in (LEASE_LOST, AttemptOutcome.RELEASED):
            return outcome
        log.info("attempt %s", outcome, extra=ctx)
        try:
            self._wake_run(claim.run_id, claim.trace_id, delay_ms)
        except Exception as exc:  # the coordinator's sweep advances the run anyway
            log.warning("wake-up not sent: %s", exc, extra=ctx)
        return outcome

    def _claim(self, attempt_id: int) -> Claim | None:
        """Claim the attempt; a session lost on the way (a restarted database) is reopened
        and the claim tried again once it answers."""
        s = self.settings
        for wait_s in (0.0, *RECONNECT_WAITS_S):
            if self.stopping.wait(wait_s):
                break
            try:
                return claim_attempt(self._state_conn(), attempt_id, s.owner, s.lease_ttl_s)
            except psycopg2.Error as exc:
                if not connection_lost(exc):
                    raise
                self._drop_state_conn()
                log.warning("database unavailable for a claim: %s", exc)
        return None  # the sweep sends the wake-up again

    def _follower_claims(self) -> list[Claim]:
        """The attempts of the running group's fused followers."""
        return [m.claim for m in followers(self._group)]

    def _run_claimed(self, claim: Claim, heartbeat: Heartbeat, ctx: dict) -> tuple[str, int | None]:
        """The claimed attempt to its outcome (and the retry delay, if any). A lost session
        is not the attempt's failure: the executor takes its attempt back, fenced, as soon
        as the database answers and goes on from the last committed checkpoint, instead of
        the step waiting out the lease. A step that loses its session again and again is
        left to its lease, like one that kills its executor (the reaper's poison guard).
        What ends the claimed step ends its fused followers too: they wait again (pending)
        for its next attempt, or end canceled with it."""
        s = self.settings
        for _ in range(MAX_TAKE_BACKS + 1):
            conn = self._state_conn()
            try:
                self._execute(conn, claim, heartbeat)
                return AttemptOutcome.SUCCEEDED, None
            except LeaseLost as exc:
                _rollback(conn)
                log.warning("lease lost, stopping: %s", exc, extra=ctx)
                return LEASE_LOST, None
            except StagingRefused as exc:
                _rollback(conn)
                self._defer_staging = False
                log.info("%s; going on from the checkpoint, batch by batch", exc, extra=ctx)
                continue
            except ExecutorStopping:
                _rollback(conn)
                next_attempt = release(conn, claim, self._follower_claims(), s, heartbeat)
                if next_attempt is not None:
                    self._wake_attempt(next_attempt, claim.trace_id)
                log.info("executor stopping: step handed to a new attempt", extra=ctx)
                return AttemptOutcome.RELEASED, None
            except StepCanceled:
                _rollback(conn)
                for follower in self._follower_claims():
                    end_canceled(conn, follower, "run canceled", s)
                end_canceled(conn, claim, "run canceled", s)
                return AttemptOutcome.CANCELED, None
            except (Exception, TimeLimitExceeded) as exc:
                if connection_lost(exc):
                    log.warning("database session lost mid-step: %s", exc, extra=ctx)
                    if self._take_back(claim, heartbeat, ctx):
                        continue
                    break
                _rollback(conn)
                outcome, delay_ms = fail(conn, claim, exc, s)
                if outcome != LEASE_LOST:
                    why = f"{claim.step_name} stopped"
                    unfuse(conn, self._follower_claims(), why, s, heartbeat)
                log.warning("attempt %s: %s", outcome, exc, extra=ctx)
                return outcome, delay_ms
        return LEASE_LOST, None

    def _take_back(self, claim: Claim, heartbeat: Heartbeat, ctx: dict) -> bool:
        """After a lost session: the attempt taken back from its checkpoint when it is
        still ours (`actors.recovery`)."""
        self._drop_state_conn()
        return take_back(
            claim,
            heartbeat,
            ctx,
            settings=self.settings,
            connect=self._state_conn,
            drop=self._drop_state_conn,
            followers=self._follower_claims(),
            stopping=self.stopping,
            clock=self._clock,
        )

    def _execute(self, conn, claim: Claim, heartbeat: Heartbeat) -> None:
        """Load the step's context, form its group, run its remaining batches through the
        group, complete it: the attempt's whole life between claim and outcome."""
        ctx = load_context(conn, claim.run_id, claim.step_name)
        self.settings.faults.at_attempt_start(ctx.step.name, claim.number)
        if not self._group:  # a take-back goes on with the group it had
            self._group = form_group(conn, claim, ctx, heartbeat, self.settings)
            self._spans.adopt(self._follower_claims())
        group = self._group
        for m in group:  # a take-back starts again from the committed checkpoints
            m.work = None
            if m.claim == claim:
                m.ctx = ctx
            elif m.claim is not None:
                m.ctx = load_context(conn, claim.run_id, m.name)
            else:
                m.ctx = replace(m.ctx, progress=fresh_progress(m.ctx.progress.columns))
        try:
            root = group[0]
            self._open(conn, root, claim.run_id)
            started = self._clock()
            checkpoint = root.ctx.progress.checkpoint if root.claim else None
            records_before = root.ctx.progress.records_in if root.claim else 0
            for batch in root.work.source.batches(checkpoint, records_before):
                self._check(conn, heartbeat, started)
                if batch.records_in > 0:
                    self._run_batch(conn, claim.run_id, batch, heartbeat)
            self._wait_commits()
            self._check(conn, heartbeat, started)
            self._complete(conn, claim.run_id)
        except StepCanceled:
            for m in self._group:
                if m.work is not None and m.work.sink is not None and m.claim is not None:
                    m.work.sink.discard()  # a canceled step's export never becomes visible
            raise
        finally:
            self._committer.settle()  # what ends the attempt finds nothing in flight
            for m in self._group:
                if m.work is not None and m.work.sink is not None:
                    m.work.sink.close()

    def _wait_commits(self) -> None:
        """Wait for the batch in flight (its error raises here); its cancel flag counts."""
        if self._committer.wait():
            self._heartbeat.cancel.set()

    def _open(self, conn, m: Member, run_id: str) -> None:
        """Open a member's parts (`group.open_member`) with this executor's settings, with
        no batch in flight (a member starting fresh fences its attempt and clears leftovers)."""
        self._wait_commits()
        open_member(conn, m, self._group, run_id, self.settings, self._connect_sandbox)
        if m.claim is not None:
            m.checks = open_checks(conn, m.ctx.step, run_id, m.ctx.progress.checkpoint)

    def _leave(self, conn, m: Member, exc: Exception) -> None:
        """`m`, a fused follower, failed: it leaves the group (`endings.leave`) once the
        batch in flight, which holds its checkpoint, has committed."""
        self._wait_commits()
        self._group = leave(conn, self._group, m, exc, self.settings, self._heartbeat)

    @contextmanager
    def _own_failure(self, conn, m: Member) -> Iterator[None]:
        """A fused follower's failure in the block is its own: it leaves the group and the
        others go on. The claimed step's failure, a lost session, or the error of the batch
        in flight (waited for in the block) is the attempt's."""
        try:
            yield
        except Exception as exc:
            if connection_lost(exc) or not m.follower or self._committer.raised(exc):
                raise
            _rollback(conn)
            self._leave(conn, m, exc)

    def _run_batch(self, conn, run_id: str, batch: InputBatch, heartbeat: Heartbeat) -> None:
        """One input batch through the group, then one transaction that commits each
        member's output and checkpoint behind its fence. A follower that fails leaves the
        group; the claimed step's failure is the attempt's."""
        group = self._group
        for m in group:
            m.out, m.done, m.staged = None, False, None
            m.kept_before = m.ctx.progress.output_kept
        for m in list(group):
            if m not in self._group:
                continue  # left with a failed member upstream of it
            given = batch if m is group[0] else fed(m)
            if given is None:
                continue
            began = self._clock()
            with self._own_failure(conn, m):
                if m.work is None:
                    self._open(conn, m, run_id)
                process_batch(
                    m, given, self.settings.faults, self._defer_staging, self._wait_commits
                )
            m.spent_s += self._clock() - began
            release_taken(self._group, m)
            if m.head and (out := over_budget(self._group, m, self.settings.fusion_budget)):
                self._wait_commits()  # the batch in flight holds their checkpoints
                self._group = cut(conn, self._group, out, self.settings, self._heartbeat)
        if _commit_batch(conn, self._committer, self._group, run_id, self.settings):
            heartbeat.cancel.set()

    def _complete(self, conn, run_id: str) -> None:
        """After the last batch: check every replayed output against its recorded digest,
        then for each member the computation's final records (aggregates), its export and
        reject file published; then one transaction commits every member as succeeded,
        each behind its fence. Before anything is published, a fenced commit that waits for
        its WAL flush: the batches' commits may not have waited for theirs
        (`actors.committer`), and nothing may become visible on batches a crash of the
        database could take back."""
        head = next(m for m in self._group if m.head)
        with conn.cursor() as cur:
            fence(cur, head.claim.attempt_id, self.settings.owner, self.settings.lease_ttl_s)
        conn.commit()
        for m in list(self._group):
            if m not in self._group:
                continue
            with self._own_failure(conn, m):
                if m.work is None:
                    self._open(conn, m, run_id)
                if m.claim is None:
                    check_replay(m)
                else:
                    finish_member(conn, m, self._spans)
                    self.settings.faults.after_publish(m.name, m.claim.number)
        _commit_succeeded(conn, self._group, self.settings)

    def _check(self, conn, heartbeat: Heartbeat, started: float) -> None:
        """Batch-boundary checks: lease, cancel, shutdown, timeout. Each step of a group has
        its own timeout over its own time: a follower's batches, and for the claimed step
        the rest (reading the input, recomputing what was not kept, its own batches)."""
        if heartbeat.lost.is_set():
            raise LeaseLost("heartbeat found the lease taken over")
        if heartbeat.cancel.is_set():
            raise StepCanceled("run canceled")
        if self.stopping.is_set():
            raise ExecutorStopping("executor is stopping")
        limit_s = self.settings.step_timeout_s
        group_followers = followers(self._group)
        for m in group_followers:
            if m in self._group and m.spent_s > limit_s:
                self._leave(conn, m, _timeout(m.spent_s, limit_s))
        elapsed = self._clock() - started - sum(m.spent_s for m in group_followers)
        if elapsed > limit_s:
            raise _timeout(elapsed, limit_s)


def _commit_batch(
    conn, committer: BatchCommitter, group: list[Member], run_id: str, s: ExecutorSettings
) -> bool:
    """The batch's one transaction: the table rows its members defer, then every member
    that processed it commits its output (when kept) and checkpoint, each behind its own
    fence, in one statement; sent by `committer` (maybe still in flight on return).
    Returns the run's cancel flag as a commit that finished saw it."""
    steps, staged = [], []
    for m in group:
        if not m.done or m.claim is None:
            continue
        progress, out = m.ctx.progress, m.out
        rows = out.rows if out is not None and m.work.keep_output else None
        seq, n = (out.seq, out.n) if out is not None else (progress.batches, 0)
        if progress.state_part is not None:  # an aggregate's: stored as batch -1 - index
            seq, rows = -1 - progress.state_part[0], progress.state_part[1]
        steps.append(StepCommit(m.claim.attempt_id, progress.values(m.name), seq, n, rows))
        if m.staged is not None:
            staged.append(m.staged)
        if m.checks is not None:
            staged.extend(m.checks.take_staged())
    if not steps:
        return False
    fenced = {"owner": s.owner, "ttl_s": s.lease_ttl_s}
    return committer.commit(conn, run_id, fenced, steps, staged)


def _commit_succeeded(conn, group: list[Member], s: ExecutorSettings) -> None:
    """The attempt's last transaction: each member with an attempt, behind its fence,
    stores its final batches and checkpoint and ends succeeded, its step with it."""
    with conn.cursor() as cur:
        for m in group:
            if m.claim is None:
                continue
            claim, progress = m.claim, m.ctx.progress
            fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
            for n_records, rows in m.final:
                write_batch(cur, claim.run_id, m.name, progress.batches, n_records, rows)
                progress.batches += 1
            cur.execute(QUERIES["save_checkpoint"], progress.params(claim.run_id, m.name))
            finish(cur, claim, AttemptOutcome.SUCCEEDED, None, step_status=StepStatus.SUCCEEDED)
    conn.commit()
    lineage.steps_ended([m.claim for m in group], AttemptOutcome.SUCCEEDED)


def _timeout(elapsed_s: float, limit_s: float) -> StepTimeout:
    return StepTimeout(f"step timed out after {elapsed_s:.1f} s (limit {limit_s:g} s)")


def _rollback(conn) -> None:
    """Roll back; a session that is already gone has nothing to roll back."""
    try:
        conn.rollback()
    except psycopg2.Error as exc:
        if not connection_lost(exc):
            raise
