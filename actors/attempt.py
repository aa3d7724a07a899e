"""One step attempt, from its claim to its ending: the state of one attempt and its walk.

An `Attempt` is made for each claimed attempt (`actors.runner` claims it) and owns what is
that attempt's alone: its claim and log context, its spans, its heartbeat, its group
(`actors.group`), whether its table rows stage in the batches' commits, and its timing.
What belongs to the executor process (the state session, the settings, the batch
committer's session) comes in a `Process`.

The walk reads in one direction: `run` holds the attempt under its heartbeat and spans,
`_outcome` turns the pass's end into one of the endings (`actors.endings`: succeeded,
failed, canceled, released) or takes the attempt back from its checkpoint after a lost
session (`actors.recovery`), and `_execute` is the pass: context, group, batch after
batch through the group (`actors.memberpass`), each committed fenced in one transaction,
then the members' ends and the one transaction that commits them succeeded."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg2
from dramatiq.middleware.time_limit import TimeLimitExceeded

from actors import lineage
from actors.checks import open_checks
from actors.committer import BatchCommitter
from actors.endings import LEASE_LOST, cut, end_canceled, fail, leave, release, succeed, unfuse
from actors.errors import ExecutorStopping, LeaseLost, StagingRefused, StepCanceled, StepTimeout
from actors.group import Group, Member
from actors.leases import Claim, Heartbeat, fence
from actors.memberpass import commit_batch, finish_member, process_batch
from actors.progress import load_context
from actors.recovery import MAX_TAKE_BACKS, take_back
from actors.settings import ExecutorSettings
from actors.steps import InputBatch
from actors.tracing import AttemptSpans
from dag import AttemptOutcome
from ddl import connection_lost

log = logging.getLogger("etl.executor")


@dataclass(frozen=True)
class Process:
    """What an attempt uses of its executor process: the settings, the batch committer,
    the kept state session (`state` opens it when there is none, `drop_state` forgets one
    that is gone), new sessions (`connect_state`, for the heartbeat; `connect_sandbox`),
    the wake-ups it sends, the process's stop flag and its clock."""

    settings: ExecutorSettings
    committer: BatchCommitter
    state: Callable[[], Any]
    drop_state: Callable[[], None]
    connect_state: Callable[[], Any]
    connect_sandbox: Callable[[], Any]
    wake_run: Callable[[str, str, int | None], None]
    wake_attempt: Callable[[int, str], None]
    stopping: threading.Event
    clock: Callable[[], float]


class Attempt:
    """One claimed attempt: `run` takes it to its ending and returns its outcome."""

    def __init__(self, claim: Claim, process: Process):
        s = process.settings
        self.claim, self.process, self.settings = claim, process, s
        self.log_extra = {
            "run_id": claim.run_id,
            "step": claim.step_name,
            "attempt": claim.number,
            "trace_id": claim.trace_id,
        }
        self.spans = AttemptSpans(claim, s.name)
        self.heartbeat = Heartbeat(
            process.connect_state,
            claim.attempt_id,
            s.owner,
            ttl_s=s.lease_ttl_s,
            interval_s=s.heartbeat_s,
            max_age_s=s.step_timeout_s + 2 * s.heartbeat_s,
        )
        self.group = Group()  # formed by its first pass; a take-back goes on with it
        self.defer_staging = s.overlap and s.sandbox_in_state  # table rows in the commits
        self.started = 0.0  # when its pass began (its step timeout counts from there)
        self.conn = None  # the state session, as last opened

    def run(self) -> str:
        """The attempt under its heartbeat, its spans ended with its outcome (its log lines
        carry the attempt span's ids), the dag-advancer woken."""
        claim, extra = self.claim, self.log_extra
        with self.spans.current():
            log.info("attempt claimed", extra=extra)
            lineage.steps_started([claim])
            with self.heartbeat:
                outcome, delay_ms = self._outcome()
            self.spans.end(self.conn, outcome)
            if outcome in (LEASE_LOST, AttemptOutcome.RELEASED):
                return outcome
            log.info("attempt %s", outcome, extra=extra)
            try:
                self.process.wake_run(claim.run_id, claim.trace_id, delay_ms)
            except Exception as exc:  # the coordinator's sweep advances the run anyway
                log.warning("wake-up not sent: %s", exc, extra=extra)
            return outcome

    def _outcome(self) -> tuple[str, int | None]:
        """The pass to its outcome (and the retry delay, if any). A lost session is not the
        attempt's failure: it is taken back, fenced, as soon as the database answers and
        goes on from the last committed checkpoint (`actors.recovery`); one that loses its
        session again and again is left to its lease. What ends the claimed step ends its
        fused followers too: they wait again (pending) for its next attempt, or end
        canceled with it."""
        claim, s, extra = self.claim, self.settings, self.log_extra
        for _ in range(MAX_TAKE_BACKS + 1):
            conn = self._state()
            try:
                self._execute(conn)
                return AttemptOutcome.SUCCEEDED, None
            except LeaseLost as exc:
                _rollback(conn)
                log.warning("lease lost, stopping: %s", exc, extra=extra)
                return LEASE_LOST, None
            except StagingRefused as exc:
                _rollback(conn)
                self.defer_staging = False
                log.info("%s; going on from the checkpoint, batch by batch", exc, extra=extra)
                continue
            except ExecutorStopping:
                _rollback(conn)
                followers = self.group.follower_claims()
                next_attempt = release(conn, claim, followers, s, self.heartbeat)
                if next_attempt is not None:
                    self.process.wake_attempt(next_attempt, claim.trace_id)
                log.info("executor stopping: step handed to a new attempt", extra=extra)
                return AttemptOutcome.RELEASED, None
            except StepCanceled:
                _rollback(conn)
                for follower in self.group.follower_claims():
                    end_canceled(conn, follower, "run canceled", s)
                end_canceled(conn, claim, "run canceled", s)
                return AttemptOutcome.CANCELED, None
            except (Exception, TimeLimitExceeded) as exc:
                if connection_lost(exc):
                    log.warning("database session lost mid-step: %s", exc, extra=extra)
                    if self._take_back():
                        continue
                    break
                _rollback(conn)
                outcome, delay_ms = fail(conn, claim, exc, s)
                if outcome != LEASE_LOST:
                    why = f"{claim.step_name} stopped"
                    unfuse(conn, self.group.follower_claims(), why, s, self.heartbeat)
                log.warning("attempt %s: %s", outcome, exc, extra=extra)
                return outcome, delay_ms
        return LEASE_LOST, None

    def _state(self):
        self.conn = self.process.state()
        return self.conn

    def _drop_state(self) -> None:
        self.process.drop_state()
        self.conn = None

    def _take_back(self) -> bool:
        """After a lost session: the attempt taken back from its checkpoint when it is
        still ours (`actors.recovery`)."""
        self._drop_state()
        return take_back(
            self.claim,
            self.heartbeat,
            self.log_extra,
            settings=self.settings,
            connect=self._state,
            drop=self._drop_state,
            followers=self.group.follower_claims(),
            stopping=self.process.stopping,
            clock=self.process.clock,
        )

    def _execute(self, conn) -> None:
        """Load the step's context, form its group, run its remaining batches through the
        group, complete it: the attempt's whole life between claim and outcome."""
        claim, s, group = self.claim, self.settings, self.group
        ctx = load_context(conn, claim.run_id, claim.step_name)
        s.faults.at_attempt_start(ctx.step.name, claim.number)
        if not group.members:  # a take-back goes on with the group it had
            group = self.group = Group.form(conn, claim, ctx, self.heartbeat, s)
            self.spans.adopt(group.follower_claims())
        group.rewind(conn, claim, ctx)
        try:
            root = group.members[0]
            self._open(conn, root)
            self.started = self.process.clock()
            checkpoint = root.ctx.progress.checkpoint if root.claim else None
            records_before = root.ctx.progress.records_in if root.claim else 0
            for batch in root.work.source.batches(checkpoint, records_before):
                self._check(conn)
                if batch.records_in > 0:
                    self._run_batch(conn, batch)
            self._wait_commits()
            self._check(conn)
            self._complete(conn)
        except StepCanceled:
            group.discard_exports()  # a canceled step's export never becomes visible
            raise
        finally:
            self.process.committer.settle()  # what ends the attempt finds nothing in flight
            group.close_exports()

    def _open(self, conn, m: Member) -> None:
        """Open a member's parts (`Group.open`) and its checks, with no batch in flight (a
        member starting fresh fences its attempt and clears leftovers)."""
        self._wait_commits()
        run_id = self.claim.run_id
        self.group.open(conn, m, run_id, self.settings, self.process.connect_sandbox)
        if m.claim is not None:
            m.checks = open_checks(conn, m.ctx.step, run_id, m.ctx.progress.checkpoint)

    def _wait_commits(self) -> None:
        """Wait for the batch in flight (its error raises here); its cancel flag counts."""
        if self.process.committer.wait():
            self.heartbeat.cancel.set()

    def _check(self, conn) -> None:
        """Batch-boundary checks: lease, cancel, shutdown, timeout. Each step of a group has
        its own timeout over its own time: a follower's batches, and for the claimed step
        the rest (reading the input, recomputing what was not kept, its own batches)."""
        heartbeat = self.heartbeat
        if heartbeat.lost.is_set():
            raise LeaseLost("heartbeat found the lease taken over")
        if heartbeat.cancel.is_set():
            raise StepCanceled("run canceled")
        if self.process.stopping.is_set():
            raise ExecutorStopping("executor is stopping")
        limit_s = self.settings.step_timeout_s
        followers = self.group.followers()
        for m in followers:
            if m in self.group.members and m.spent_s > limit_s:
                self._leave(conn, m, _timeout(m.spent_s, limit_s))
        elapsed = self.process.clock() - self.started - sum(m.spent_s for m in followers)
        if elapsed > limit_s:
            raise _timeout(elapsed, limit_s)

    def _run_batch(self, conn, batch: InputBatch) -> None:
        """One input batch through the group, then one transaction that commits each
        member's output and checkpoint behind its fence. A follower that fails leaves the
        group; the claimed step's failure is the attempt's."""
        group, s, clock = self.group, self.settings, self.process.clock
        for m in group.members:
            m.out, m.done, m.staged = None, False, None
            m.kept_before = m.ctx.progress.output_kept
        root = group.members[0]
        for m in list(group.members):
            if m not in group.members:
                continue  # left with a failed member upstream of it
            given = batch if m is root else m.fed()
            if given is None:
                continue
            began = clock()
            with self._own_failure(conn, m):
                if m.work is None:
                    self._open(conn, m)
                process_batch(m, given, s.faults, self.defer_staging, self._wait_commits)
            m.spent_s += clock() - began
            group.release_taken(m)
            if m.head and (out := group.over_budget(m, s.fusion_budget)):
                self._wait_commits()  # the batch in flight holds their checkpoints
                cut(conn, group, out, s, self.heartbeat)
        if commit_batch(conn, self.process.committer, group, self.claim.run_id, s):
            self.heartbeat.cancel.set()

    @contextmanager
    def _own_failure(self, conn, m: Member) -> Iterator[None]:
        """A fused follower's failure in the block is its own: it leaves the group and the
        others go on. The claimed step's failure, a lost session, or the error of the batch
        in flight (waited for in the block) is the attempt's."""
        try:
            yield
        except Exception as exc:
            if connection_lost(exc) or not m.follower or self.process.committer.raised(exc):
                raise
            _rollback(conn)
            self._leave(conn, m, exc)

    def _leave(self, conn, m: Member, exc: Exception) -> None:
        """`m`, a fused follower, failed: it leaves the group (`endings.leave`) once the
        batch in flight, which holds its checkpoint, has committed."""
        self._wait_commits()
        leave(conn, self.group, m, exc, self.settings, self.heartbeat)

    def _complete(self, conn) -> None:
        """After the last batch: check every replayed output against its recorded digest,
        then for each member the computation's final records (aggregates), its export and
        reject file published; then one transaction commits every member as succeeded,
        each behind its fence (`endings.succeed`). Before anything is published, a fenced
        commit that waits for its WAL flush: the batches' commits may not have waited for
        theirs (`actors.committer`), and nothing may become visible on batches a crash of
        the database could take back."""
        s, group, claim = self.settings, self.group, self.claim
        with conn.cursor() as cur:
            fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
        conn.commit()
        for m in list(group.members):
            if m not in group.members:
                continue
            with self._own_failure(conn, m):
                if m.work is None:
                    self._open(conn, m)
                if m.claim is None:
                    m.check_replay()
                else:
                    finish_member(conn, m, self.spans)
                    s.faults.after_publish(m.name, m.claim.number)
        succeed(conn, group, s)


def _timeout(elapsed_s: float, limit_s: float) -> StepTimeout:
    return StepTimeout(f"step timed out after {elapsed_s:.1f} s (limit {limit_s:g} s)")


def _rollback(conn) -> None:
    """Roll back; a session that is already gone has nothing to roll back."""
    try:
        conn.rollback()
    except psycopg2.Error as exc:
        if not connection_lost(exc):
            raise
