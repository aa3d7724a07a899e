"""The executor's side of a step attempt: claim, run batch by batch, commit fenced.

For every input batch the executor computes the output, writes exports and reject rows (each
idempotent per batch number and invisible until the step commits), then commits the output
batch, the checkpoint (input position, counters, running digests, aggregate state) in ONE
transaction that starts with the lease fence. A crash re-runs only the unfinished batch; a
stale executor's commit changes nothing.

Stage fusion (`dag.fusion`): the claimed step adopts the pending steps that hang off it
(each gets its own attempt, claimed by us and fenced with ours), and every input batch goes
through all of them in one pass, their outputs handed over in memory; each member still
commits its own checkpoint, counters and digests, all in the batch's one transaction, so
the members' checkpoints always fit together and a group resumes as a group. A follower
that fails leaves the group (its own attempt fails, its dependents in the group wait again)
and the others go on. A step whose upstream output was not kept recomputes it first
(`dag.replay_chain`) and fails loudly if the recomputed digest differs from the recorded one."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras
from dramatiq.middleware.time_limit import TimeLimitExceeded

import connectors
from actors.errors import ExecutorStopping, LeaseLost, StepCanceled, StepTimeout
from actors.faults import Faults
from actors.leases import Claim, Heartbeat, claim_attempt, fence
from actors.outputs import commit_batch, write_batch
from actors.progress import StepContext, StepWork, fresh_progress, load_context
from actors.sql import QUERIES
from actors.steps import (
    FusedSource,
    InputBatch,
    StepEnv,
    build_compute,
    build_sink,
    build_source,
    compute_batch,
)
from dag import (
    BATCH_SIZE,
    AttemptOutcome,
    InputDataError,
    RowValueError,
    StepStatus,
    chain_rows,
    decide_retry,
    encode_rows,
    fusion_group,
    is_input_data_error,
    parse_plan,
    replay_chain,
)
from dag.plan import ON_ROW_ERROR_STOP
from ddl import connection_lost

log = logging.getLogger("etl.executor")
# What `run_attempt` answers when a fence found the attempt taken over (not an outcome).
LEASE_LOST = "lease_lost"
# Pauses between tries to reach a database that went away (restart, terminated sessions).
MAX_TAKE_BACKS = 10  # per attempt
RECONNECT_WAITS_S = (0.2, 0.5, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0)


class ReplayMismatch(InputDataError):
    """A recomputed upstream output differs from the one its step recorded (its input
    changed since): the dependent fails instead of running on different data."""


@dataclass(frozen=True)
class ExecutorSettings:
    """Everything an executor needs besides its connections."""

    name: str
    owner: str  # name:boot id - the lease owner identity
    lease_ttl_s: float
    heartbeat_s: float
    step_timeout_s: float
    data_dir: Path
    export_dir: Path
    reject_dir: Path
    faults: Faults = field(default_factory=Faults)
    fusion: bool = True  # run the steps that hang off a step in one pass with it


@dataclass
class Member:
    """One step of an attempt's group: the claimed step, a fused follower (its own attempt,
    run inside the claimed one) or a replayed upstream step (`claim` None: recomputed, its
    recorded state untouched, its output digest checked at the end)."""

    ctx: StepContext
    claim: Claim | None
    upstream: Member | None = None  # the member whose output it reads; None for the first
    work: StepWork | None = None  # opened at its first input
    out: tuple[list[dict], bytes, int] | None = None  # this batch's output: records, rows, seq
    skip: float = 0  # replayed: output batches the next member has consumed already
    expected_digest: str = ""  # replayed: the output digest its step recorded
    done: bool = False  # processed this batch (its checkpoint commits with the batch)
    spent_s: float = 0.0  # a follower's time in its own batches (its step timeout counts it)
    head: bool = False  # the claimed step (whose attempt the group runs in)
    final: list[tuple[int, bytes]] = field(default_factory=list)  # aggregates' last batches

    @property
    def name(self) -> str:
        return self.ctx.step.name

    @property
    def follower(self) -> bool:
        """A fused follower: a step with its own attempt, run inside the head's."""
        return self.claim is not None and not self.head

    def below(self, other: Member) -> bool:
        """True if `other` is this member or upstream of it in the group."""
        m: Member | None = self
        while m is not None:
            if m is other:
                return True
            m = m.upstream
        return False


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
        stopping: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.settings = settings
        self._connect_state = connect_state
        self._connect_sandbox = connect_sandbox
        self._wake_run = wake_run
        self._wake_attempt = wake_attempt
        self.stopping = stopping or threading.Event()
        self._clock = clock
        self._conn = None
        self._group: list[Member] = []  # the running attempt's members, in order
        self._heartbeat: Heartbeat | None = None  # the running attempt's

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
        log.info("attempt claimed", extra=ctx)
        heartbeat = Heartbeat(
            self._connect_state,
            attempt_id,
            s.owner,
            ttl_s=s.lease_ttl_s,
            interval_s=s.heartbeat_s,
            max_age_s=s.step_timeout_s + 2 * s.heartbeat_s,
        )
        self._group, self._heartbeat = [], heartbeat
        with heartbeat:
            outcome, delay_ms = self._run_claimed(claim, heartbeat, ctx)
        self._group, self._heartbeat = [], None
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

    def _followers(self) -> list[Member]:
        """The running group's fused followers."""
        return [m for m in self._group if m.follower]

    def _run_claimed(self, claim: Claim, heartbeat: Heartbeat, ctx: dict) -> tuple[str, int | None]:
        """The claimed attempt to its outcome (and the retry delay, if any). A lost session
        is not the attempt's failure: the executor takes its attempt back, fenced, as soon
        as the database answers and goes on from the last committed checkpoint, instead of
        the step waiting out the lease. A step that loses its session again and again is
        left to its lease, like one that kills its executor (the reaper's poison guard).
        What ends the claimed step ends its fused followers too: they wait again (pending)
        for its next attempt, or end canceled with it."""
        for _ in range(MAX_TAKE_BACKS + 1):
            conn = self._state_conn()
            try:
                self._execute(conn, claim, heartbeat)
                return AttemptOutcome.SUCCEEDED, None
            except LeaseLost as exc:
                _rollback(conn)
                log.warning("lease lost, stopping: %s", exc, extra=ctx)
                return LEASE_LOST, None
            except ExecutorStopping:
                _rollback(conn)
                self._release(conn, claim)
                log.info("executor stopping: step handed to a new attempt", extra=ctx)
                return AttemptOutcome.RELEASED, None
            except StepCanceled:
                _rollback(conn)
                for m in self._followers():
                    self._end(conn, m.claim, AttemptOutcome.CANCELED, "run canceled")
                self._end(conn, claim, AttemptOutcome.CANCELED, "run canceled")
                return AttemptOutcome.CANCELED, None
            except (Exception, TimeLimitExceeded) as exc:
                if connection_lost(exc):
                    log.warning("database session lost mid-step: %s", exc, extra=ctx)
                    if self._take_back(claim, heartbeat, ctx):
                        continue
                    break
                _rollback(conn)
                outcome, delay_ms = self._fail(conn, claim, exc)
                if outcome != LEASE_LOST:
                    self._unfuse(conn, self._followers(), f"{claim.step_name} stopped")
                log.warning("attempt %s: %s", outcome, exc, extra=ctx)
                return outcome, delay_ms
        return LEASE_LOST, None

    def _take_back(self, claim: Claim, heartbeat: Heartbeat, ctx: dict) -> bool:
        """After a lost session: reconnect and fence our attempt (and our followers') in a
        transaction of its own. True when the attempt is still ours (go on from the
        checkpoint); False when the lease was taken over, or the database stayed away until
        the executor stopped or the step ran out of time (the reaper hands the step over
        then)."""
        s = self.settings
        self._drop_state_conn()
        given_up = self._clock() + s.step_timeout_s
        waits = iter(RECONNECT_WAITS_S)
        while not heartbeat.lost.is_set() and self._clock() < given_up:
            if self.stopping.wait(next(waits, RECONNECT_WAITS_S[-1])):
                return False
            try:
                conn = self._state_conn()
                with conn.cursor() as cur:
                    cancel = fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
                    for m in self._followers():
                        fence(cur, m.claim.attempt_id, s.owner, s.lease_ttl_s)
                conn.commit()
            except LeaseLost as exc:
                _rollback(self._conn)
                log.warning("lease lost while the database was away: %s", exc, extra=ctx)
                return False
            except psycopg2.Error as exc:
                if not connection_lost(exc):
                    raise
                self._drop_state_conn()
                continue
            if cancel:
                heartbeat.cancel.set()
            log.info("database back: attempt continues from its checkpoint", extra=ctx)
            return True
        return False

    def _execute(self, conn, claim: Claim, heartbeat: Heartbeat) -> None:
        """Load the step's context, form its group, run its remaining batches through the
        group, complete it: the attempt's whole life between claim and outcome."""
        ctx = load_context(conn, claim.run_id, claim.step_name)
        self.settings.faults.at_attempt_start(ctx.step.name, claim.number)
        if not self._group:  # a take-back goes on with the group it had
            self._group = self._form_group(conn, claim, ctx, heartbeat)
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
            self._open_member(conn, root)
            started = self._clock()
            checkpoint = root.ctx.progress.checkpoint if root.claim else None
            records_before = root.ctx.progress.records_in if root.claim else 0
            for batch in root.work.source.batches(checkpoint, records_before):
                self._check(conn, heartbeat, started)
                if batch.records_in > 0:
                    self._run_batch(conn, batch, heartbeat)
            self._check(conn, heartbeat, started)
            self._complete(conn)
        except StepCanceled:
            for m in self._group:
                if m.work is not None and m.work.sink is not None and m.claim is not None:
                    m.work.sink.discard()  # a canceled step's export never becomes visible
            raise
        finally:
            for m in self._group:
                if m.work is not None and m.work.sink is not None:
                    m.work.sink.close()

    def _form_group(self, conn, claim: Claim, ctx: StepContext, heartbeat: Heartbeat):
        """The claimed step's group: the upstream steps it must recompute (their output was
        not kept), the step, and the pending followers it adopts: each gets an attempt of
        its own, claimed by us, in one fenced transaction (`dag.fusion_group`)."""
        s, plan, run_id = self.settings, ctx.plan, claim.run_id
        with conn.cursor() as cur:
            cur.execute(QUERIES["lock_run_steps"], {"run_id": run_id})
            rows = {r[0]: r[1:] for r in cur.fetchall()}
            states = {name: r[0] for name, r in rows.items()}
            aligned = {
                name
                for name, (_, checkpoint, _) in rows.items()
                if len(plan.step(name).depends_on) == 1
                and _fused_position(checkpoint) == rows[plan.step(name).depends_on[0]][2]
            }
            names = fusion_group(plan, claim.step_name, states, aligned) if s.fusion else ()
            fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
            adopted: dict[str, Claim] = {claim.step_name: claim}
            for name in names:
                keys = {"run_id": run_id, "name": name}
                if plan.step(name).depends_on[0] not in adopted:
                    continue
                cur.execute(QUERIES["adopt_step"], keys)
                if cur.fetchone() is None:
                    continue
                params = {
                    **keys,
                    "head": claim.attempt_id,
                    "owner": s.owner,
                    "ttl_s": s.lease_ttl_s,
                }
                cur.execute(QUERIES["create_fused_attempt"], params)
                attempt_id, number = cur.fetchone()
                adopted[name] = Claim(
                    attempt_id, run_id, name, number, claim.trace_id, claim.pipeline_id
                )
        conn.commit()
        head = Member(ctx, claim, head=True)
        group = self._replayed(conn, run_id, ctx, head)
        group.append(head)
        by_name = {claim.step_name: head}
        for name, follower in list(adopted.items())[1:]:
            heartbeat.follow(follower.attempt_id, extra_age_s=s.step_timeout_s)
            upstream = by_name[plan.step(name).depends_on[0]]
            member = Member(load_context(conn, run_id, name), follower, upstream)
            by_name[name] = member
            group.append(member)
            log.info(
                "step fused",
                extra={"run_id": run_id, "step": name, "attempt": follower.number},
            )
        return group

    def _replayed(self, conn, run_id: str, ctx: StepContext, head: Member) -> list[Member]:
        """Members that recompute the succeeded upstream steps whose output `head` needs but
        nobody stored (farthest first), each fed from the one before it."""
        chain = replay_chain(ctx.plan, ctx.step.name, ctx.unkept)
        members: list[Member] = []
        for name in chain:
            recorded = load_context(conn, run_id, name)
            member = Member(
                replace(recorded, progress=fresh_progress(recorded.progress.columns)),
                None,
                members[-1] if members else None,
                expected_digest=recorded.progress.output_digest,
            )
            members.append(member)
        if members:
            head.upstream = members[-1]
            read = _fused_position(ctx.progress.checkpoint)
            members[-1].skip = math.inf if read is None else read
            log.info(
                "recomputing upstream output that was not kept",
                extra={"run_id": run_id, "step": ctx.step.name, "steps": list(chain)},
            )
        return members

    def _open_member(self, conn, m: Member) -> None:
        """Open a member's source, computation, sink and reject file; a fused or replayed
        member reads its upstream member's output, with that member's columns."""
        s, ctx, run_id = self.settings, m.ctx, self._run_id()
        step, cp = ctx.step, ctx.progress.checkpoint or {}
        env = StepEnv(
            run_id=run_id,
            data_dir=s.data_dir,
            export_dir=s.export_dir,
            reject_dir=s.reject_dir,
            state_conn=conn,
            sandbox_connect=self._connect_sandbox,
            upstream=ctx.upstream,
        )
        if m.upstream is not None:
            up = m.upstream
            source = FusedSource(step, up.ctx.progress.columns or up.work.compute.output_columns)
        else:
            source = build_source(step, env, ctx.progress.columns)
        compute = build_compute(step, source)
        if cp.get("state") is not None:
            compute.restore(cp["state"])
        group_names = {g.name for g in self._group if g.upstream is not None}
        dependents = ctx.plan.dependents(step.name)
        has_output = step.type != "export" or bool(dependents)
        outside = not dependents or any(d not in group_names for d in dependents)
        work = StepWork(
            source=source,
            compute=compute,
            sink=build_sink(step, env, source.columns) if m.claim is not None else None,
            rejects=connectors.reject_file(s.reject_dir, run_id, step.name),
            keep_output=has_output and outside and m.claim is not None,
            has_output=has_output,
            chunks=cp.get("chunks", 0),
            reject_chunks=cp.get("reject_chunks", 0),
            n_batches=cp.get("n", 0),
        )
        m.work = work
        if m.claim is None:
            return
        if m.upstream is not None:
            s.faults.at_attempt_start(step.name, m.claim.number)
        if ctx.progress.checkpoint is None:
            self._start_fresh(conn, m.claim, work.sink, work.rejects)
        elif work.sink is not None:
            work.sink.start(fresh=False, chunks=work.chunks, records=ctx.progress.records_out)

    def _run_id(self) -> str:
        head = next(m for m in self._group if m.claim is not None)
        return head.claim.run_id

    def _fed(self, m: Member) -> InputBatch | None:
        """What a member gets from its upstream member in this batch (None: nothing)."""
        up = m.upstream
        if up is None or up.out is None:
            return None
        records, rows, seq = up.out
        if seq < up.skip:
            return None  # consumed before this attempt
        position = {"dep": 0, "seq": seq + 1}
        return InputBatch(records, [], len(records), position, rows=rows)

    def _run_batch(self, conn, batch: InputBatch, heartbeat: Heartbeat) -> None:
        """One input batch through the group, then one transaction that commits each
        member's output and checkpoint behind its fence. A follower that fails leaves the
        group (see `_leave`); the claimed step's failure is the attempt's."""
        group = self._group
        for m in group:
            m.out, m.done = None, False
        for m in list(group):
            if m not in self._group:
                continue  # left with a failed member upstream of it
            given = batch if m is group[0] else self._fed(m)
            if given is None:
                continue
            began = self._clock()
            try:
                if m.work is None:
                    self._open_member(conn, m)
                self._process(m, given)
            except Exception as exc:
                if connection_lost(exc) or not m.follower:
                    raise
                _rollback(conn)
                self._leave(conn, m, exc)
            m.spent_s += self._clock() - began
        self._commit(conn, heartbeat)

    def _process(self, m: Member, batch: InputBatch) -> None:
        """One member's batch: compute, write the export chunk and rejects (invisible until
        the step commits), count it in its progress."""
        s, step, progress, work = self.settings, m.ctx.step, m.ctx.progress, m.work
        s.faults.before_batch(step.name)
        first = progress.records_in + 1
        out, errors = compute_batch(work.compute, batch, first)
        if work.sink is not None:
            sink_errors = work.sink.write(work.chunks, out, first)
            if sink_errors:
                bad = {e.record for e in sink_errors}
                out = [r for i, r in enumerate(out) if first + i not in bad]
                errors += sink_errors
            work.chunks += 1
        if errors and m.claim is not None and m.ctx.plan.on_row_error == ON_ROW_ERROR_STOP:
            e = errors[0]
            raise RowValueError(e.reason, line=e.line, column=e.column)
        if errors and m.claim is not None:
            work.rejects.write_chunk(work.reject_chunks, connectors.encode_rejects(errors))
            work.reject_chunks += 1
        work.n_batches += 1
        if m.claim is not None:
            s.faults.after_export(step.name, work.n_batches, m.claim.number)
        rows = progress.advance(batch, out, errors, work)
        m.done = True
        if rows is not None:
            m.out = (out, rows, progress.batches)
            if work.has_output:
                progress.batches += 1
                progress.output_kept = progress.output_kept and (
                    work.keep_output or not m.ctx.plan.dependents(step.name)
                )

    def _commit(self, conn, heartbeat: Heartbeat) -> None:
        """The batch's one transaction: every member that processed it commits its output
        (when kept) and checkpoint, each behind its own fence, in one statement."""
        s, steps = self.settings, []
        for m in self._group:
            if not m.done or m.claim is None:
                continue
            progress, out = m.ctx.progress, m.out
            rows = out[1] if out is not None and m.work.keep_output else None
            seq, n = (out[2], len(out[0])) if out is not None else (progress.batches, 0)
            steps.append((m.claim.attempt_id, progress.values(m.name), seq, n, rows))
        if not steps:
            return
        with conn.cursor() as cur:
            fenced = {"owner": s.owner, "ttl_s": s.lease_ttl_s}
            cancel = commit_batch(cur, self._run_id(), fenced, steps)
        conn.commit()
        if cancel:
            heartbeat.cancel.set()

    def _leave(self, conn, m: Member, exc: Exception) -> None:
        """A fused follower failed: its own attempt fails (retried from its checkpoint once
        its upstream succeeded, or the step fails), the members below it wait again, and
        the rest of the group goes on."""
        outcome, _ = self._fail(conn, m.claim, exc)
        if outcome == LEASE_LOST:
            raise LeaseLost(f"attempt {m.claim.attempt_id} of fused step {m.name}")
        self._heartbeat.unfollow(m.claim.attempt_id)
        log.warning(
            "fused step left its group: %s",
            exc,
            extra={"run_id": m.claim.run_id, "step": m.name, "outcome": outcome},
        )
        below = [g for g in self._group if g is not m and g.below(m)]
        self._unfuse(conn, below, f"{m.name} failed")
        for g in [m, *below]:
            if g.work is not None and g.work.sink is not None:
                g.work.sink.close()
                g.work.sink = None
        self._group = [g for g in self._group if not g.below(m)]

    def _unfuse(self, conn, members: list[Member], why: str) -> None:
        """Fused followers that stop with the member they hang off: their attempts end
        `released` and their steps wait again (pending), checkpoints kept."""
        if not members:
            return
        try:
            with conn.cursor() as cur:
                self._unfuse_in(cur, members, why)
            conn.commit()
        except LeaseLost:
            conn.rollback()

    def _unfuse_in(self, cur, members: list[Member], why: str) -> None:
        """`_unfuse` inside the caller's transaction."""
        s = self.settings
        for m in members:
            claim = m.claim
            fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
            self._finish(cur, claim, AttemptOutcome.RELEASED, why, step_status=None)
            cur.execute(QUERIES["unfuse_step"], {"run_id": claim.run_id, "name": claim.step_name})
            self._heartbeat.unfollow(claim.attempt_id)

    def _complete(self, conn) -> None:
        """After the last batch: check every replayed output against its recorded digest,
        then for each member the computation's final records (aggregates), its export and
        reject file published; then one transaction commits every member as succeeded,
        each behind its fence."""
        s = self.settings
        for m in list(self._group):
            if m not in self._group:
                continue
            try:
                if m.work is None:
                    self._open_member(conn, m)
                if m.claim is None:
                    self._check_replay(m)
                else:
                    self._finish_member(m)
            except Exception as exc:
                if connection_lost(exc) or not m.follower:
                    raise
                _rollback(conn)
                self._leave(conn, m, exc)
        with conn.cursor() as cur:
            for m in self._group:
                if m.claim is None:
                    continue
                claim, progress = m.claim, m.ctx.progress
                fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
                for n_records, rows in m.final:
                    write_batch(cur, claim.run_id, m.name, progress.batches, n_records, rows)
                    progress.batches += 1
                cur.execute(QUERIES["save_checkpoint"], progress.params(claim.run_id, m.name))
                self._finish(
                    cur, claim, AttemptOutcome.SUCCEEDED, None, step_status=StepStatus.SUCCEEDED
                )
        conn.commit()

    def _check_replay(self, m: Member) -> None:
        """A recomputed upstream output must be the one its step recorded."""
        got = m.ctx.progress.output_digest
        if got != m.expected_digest:
            raise ReplayMismatch(
                f"step {m.name!r} was recomputed (its output was not kept) and its output "
                f"differs from the recorded one (digest {got[:12]} != {m.expected_digest[:12]}):"
                " its input changed since it ran; trigger a new run"
            )

    def _finish_member(self, m: Member) -> None:
        """A member's end: its input digest (its upstream's output digest), final records,
        export and reject file published."""
        step, progress, work = m.ctx.step, m.ctx.progress, m.work
        digest_of = getattr(work.source, "input_digest_of", None)
        if digest_of is not None:
            if m.upstream is not None and m.upstream.claim is not None:
                progress.input_digest = m.upstream.ctx.progress.output_digest
            else:
                progress.input_digest = m.ctx.upstream_digests[digest_of]
        final = work.compute.finish()
        progress.columns = work.compute.output_columns
        names = list(progress.columns)
        parts = [final[i : i + BATCH_SIZE] for i in range(0, len(final), BATCH_SIZE)]
        m.final = [(len(part), encode_rows(part, names)) for part in parts]
        for _, rows in m.final:
            progress.output_digest = chain_rows(progress.output_digest, names, rows)
        progress.records_out += len(final)
        if work.sink is not None:
            location = work.sink.publish(work.chunks, progress.records_out)
            log.info(
                "export published to %s",
                location,
                extra={"run_id": m.claim.run_id, "step": step.name},
            )
        if work.reject_chunks:
            work.rejects.publish(work.reject_chunks)

    def _start_fresh(self, conn, claim: Claim, sink, rejects) -> None:
        """A step starting from scratch drops what an attempt that committed nothing left
        behind (staging rows, chunks, output batches). All of it happens while our fence
        holds the attempt row, so a stale executor waking up here cannot wipe what the
        attempt that replaced it has written: its fence fails first."""
        with conn.cursor() as cur:
            fence(cur, claim.attempt_id, self.settings.owner, self.settings.lease_ttl_s)
            if sink is not None:
                sink.start(fresh=True)
            rejects.discard()
            cur.execute(
                QUERIES["delete_step_batches"], {"run_id": claim.run_id, "name": claim.step_name}
            )
        conn.commit()

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
        followers = self._followers()
        for m in followers:
            if m in self._group and m.spent_s > limit_s:
                self._leave(conn, m, _timeout(m.spent_s, limit_s))
        elapsed = self._clock() - started - sum(m.spent_s for m in followers)
        if elapsed > limit_s:
            raise _timeout(elapsed, limit_s)

    def _finish(
        self, cur, claim: Claim, outcome: str, error: str | None, *, step_status: str | None
    ) -> None:
        cur.execute(
            QUERIES["finish_attempt"],
            {"attempt_id": claim.attempt_id, "outcome": outcome, "error": error},
        )
        if step_status is not None:
            cur.execute(
                QUERIES["finish_step"],
                {
                    "run_id": claim.run_id,
                    "name": claim.step_name,
                    "status": step_status,
                    "error": error,
                },
            )

    def _end(self, conn, claim: Claim, how: str, error: str | None) -> None:
        """End an attempt that stops without a failure (canceled)."""
        s = self.settings
        try:
            with conn.cursor() as cur:
                fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
                self._finish(cur, claim, how, error, step_status=how)
            conn.commit()
        except LeaseLost:
            conn.rollback()

    def _release(self, conn, claim: Claim) -> None:
        """A stopping executor ends its attempt as `released` and creates the step's next
        attempt in the same transaction, so another executor continues from the checkpoint
        at once instead of after the lease TTL. Its fused followers wait again (pending) in
        that transaction too, so the next attempt finds them to adopt."""
        s = self.settings
        try:
            with conn.cursor() as cur:
                fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
                self._finish(
                    cur, claim, AttemptOutcome.RELEASED, "executor stopped", step_status=None
                )
                self._unfuse_in(cur, self._followers(), "executor stopped")
                cur.execute(
                    QUERIES["create_attempt"], {"run_id": claim.run_id, "name": claim.step_name}
                )
                next_attempt = cur.fetchone()[0]
            conn.commit()
        except LeaseLost:
            conn.rollback()
            return
        self._wake_attempt(next_attempt, claim.trace_id)

    def _fail(self, conn, claim: Claim, exc: BaseException) -> tuple[str, int | None]:
        """Record a failed attempt: retry_wait with the next delay, or the step fails."""
        s = self.settings
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
                keys = {"run_id": claim.run_id, "name": claim.step_name}
                # the advancer's lock order (every step of the run, by position): the rows
                # of the steps below may change here too
                cur.execute(QUERIES["lock_step_runs"], keys)
                cur.execute(QUERIES["count_failed_attempts"], keys)
                failures = cur.fetchone()[0] + 1
                cur.execute(QUERIES["get_run_plan"], keys)
                plan = parse_plan(cur.fetchone()[0])
                step = plan.step(claim.step_name)
                decision = decide_retry(exc, failures, step.max_attempts)
                self._finish(cur, claim, outcome, error, step_status=None)
                if isinstance(exc, connectors.StagedOutputLost):
                    # what its export staged is gone: the next attempt starts the step over
                    cur.execute(QUERIES["restart_step"], keys)
                if decision.retry:
                    cur.execute(
                        QUERIES["wait_retry"],
                        {
                            "run_id": claim.run_id,
                            "name": claim.step_name,
                            "error": error,
                            "delay_s": decision.delay_s,
                        },
                    )
                else:
                    cur.execute(
                        QUERIES["finish_step"],
                        {
                            "run_id": claim.run_id,
                            "name": claim.step_name,
                            "status": StepStatus.FAILED,
                            "error": error,
                        },
                    )
                    below = sorted(plan.descendants(claim.step_name))
                    cur.execute(QUERIES["end_waiting_dependents"], {**keys, "names": below})
            conn.commit()
        except LeaseLost:
            conn.rollback()
            return LEASE_LOST, None
        return outcome, (int(decision.delay_s * 1000) if decision.retry else None)


def _timeout(elapsed_s: float, limit_s: float) -> StepTimeout:
    return StepTimeout(f"step timed out after {elapsed_s:.1f} s (limit {limit_s:g} s)")


def _fused_position(checkpoint: dict | None) -> int | None:
    """How many output batches of its one upstream step a step has read (0 before its
    first); None when its checkpoint is not such a position (it read them all, or it reads
    a file, a table or several steps)."""
    if checkpoint is None:
        return 0
    if checkpoint.get("dep") == 0 and "seq" in checkpoint:
        return int(checkpoint["seq"])
    return None


def _rollback(conn) -> None:
    """Roll back; a session that is already gone has nothing to roll back."""
    try:
        conn.rollback()
    except psycopg2.Error as exc:
        if not connection_lost(exc):
            raise
