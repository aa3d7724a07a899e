"""Stage fusion (`dag.fusion`) on the executor's side: the group of steps an attempt runs
(`Group`, its `Member`s in order).

The claimed step adopts the pending steps that hang off it (each gets its own attempt,
claimed by us and fenced with ours), and every input batch goes through all of them in one
pass, their outputs handed over in memory (`fed`). A step whose upstream output was not
kept recomputes it first (`dag.replay_chain`): replayed members lead the group, and each
must end with the output digest its step recorded (`Member.check_replay`)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import connectors
from actors import lineage
from actors.checks import StepChecks
from actors.committer import StagedRows
from actors.errors import ReplayMismatch
from actors.leases import Claim, Heartbeat, fence
from actors.outputs import read_state_parts
from actors.progress import StepContext, StepWork, fresh_progress, load_context
from actors.settings import ExecutorSettings
from actors.sql import QUERIES
from actors.steps import FusedSource, InputBatch, StepEnv, build_compute, build_sink, build_source
from dag import BatchBytes, Plan, fit_budget, fusion_group, replay_chain

log = logging.getLogger("etl.executor")


class MemberOutput(NamedTuple):
    """A member's output of one batch: the records, their `encode_rows` bytes, its seq and
    record count. Once its consumers in the group took it, the records are dropped, and the
    rows too unless they are stored (`released`)."""

    records: list[dict]
    rows: bytes | None
    seq: int
    n: int

    def released(self, keep_rows: bool) -> MemberOutput:
        return MemberOutput([], self.rows if keep_rows else None, self.seq, self.n)


@dataclass(eq=False)
class Member:
    """One step of an attempt's group: the claimed step, a fused follower (its own attempt,
    run inside the claimed one) or a replayed upstream step (`claim` None: recomputed, its
    recorded state untouched, its output digest checked at the end). A member is itself
    alone (`eq=False`): the group finds it by identity, never by comparing its state, which
    holds a batch's output."""

    ctx: StepContext
    claim: Claim | None
    upstream: Member | None = None  # the member whose output it reads; None for the first
    work: StepWork | None = None  # opened at its first input
    out: MemberOutput | None = None  # this batch's output
    staged: StagedRows | None = None  # this batch's table rows, staged in its commit
    skip: float = 0  # replayed: output batches the next member has consumed already
    expected_digest: str = ""  # replayed: the output digest its step recorded
    done: bool = False  # processed this batch (its checkpoint commits with the batch)
    spent_s: float = 0.0  # a follower's time in its own batches (its step timeout counts it)
    head: bool = False  # the claimed step (whose attempt the group runs in)
    kept_before: bool = True  # its progress.output_kept before this batch
    final: list[tuple[int, bytes]] = field(default_factory=list)  # aggregates' last batches
    checks: StepChecks | None = None  # its data checks, counted batch by batch

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

    def fed(self) -> InputBatch | None:
        """What this member gets from its upstream member in this batch (None: nothing)."""
        up = self.upstream
        if up is None or up.out is None:
            return None
        if up.out.seq < up.skip:
            return None  # consumed before this attempt
        position = {"dep": 0, "seq": up.out.seq + 1}
        return InputBatch(up.out.records, [], up.out.n, position, rows=up.out.rows)

    def check_replay(self) -> None:
        """A recomputed upstream output must be the one its step recorded; raises
        ReplayMismatch otherwise."""
        got = self.ctx.progress.output_digest
        if got != self.expected_digest:
            raise ReplayMismatch(
                f"step {self.name!r} was recomputed (its output was not kept) and its output "
                f"differs from the recorded one (digest {got[:12]} != {self.expected_digest[:12]}):"
                " its input changed since it ran; trigger a new run"
            )


class Group:
    """The members of an attempt's group, in order (replayed members first, then the
    claimed step, then its followers, each after the member it reads): what is about all
    of them, or about a member's place among them."""

    def __init__(self, members: Iterable[Member] = ()):
        self.members = list(members)

    def followers(self) -> list[Member]:
        """The group's fused followers, in order."""
        return [m for m in self.members if m.follower]

    def follower_claims(self) -> list[Claim]:
        """The attempts of the group's fused followers."""
        return [m.claim for m in self.members if m.follower]

    def claims(self) -> list[Claim | None]:
        """Every member's attempt (None for a replayed member)."""
        return [m.claim for m in self.members]

    def below(self, m: Member) -> list[Member]:
        """`m` and the members that hang off it."""
        return [g for g in self.members if g.below(m)]

    def drop(self, gone: Iterable[Member]) -> None:
        """Members leave the group: their exports closed (nothing published)."""
        gone = list(gone)
        for g in gone:
            if g.work is not None and g.work.sink is not None:
                g.work.sink.close()
                g.work.sink = None
        self.members = [g for g in self.members if g not in gone]

    def store_for(self, out: Iterable[Member]) -> None:
        """The members that `out` (left out of the group) hung off store their output from
        this batch on, so that `out` can read it after them."""
        for m in out:
            up = m.upstream
            if (
                up in self.members
                and up.work is not None
                and up.claim is not None
                and up.work.has_output
            ):
                up.work.keep_output = True
                if up.done and up.out is not None and up.out.rows is not None:
                    up.ctx.progress.output_kept = up.kept_before

    def release_taken(self, m: Member) -> None:
        """After `m` processed its batch: its upstream's output and its own are dropped
        when every consumer of theirs in the group took them (a stored output keeps its
        rows for the batch's commit). So a batch holds a chain's outputs two at a time."""
        for x in (m.upstream, m):
            if x is None or x.out is None or not x.out.records:
                continue
            if all(g.done for g in self.members if g.upstream is x):
                x.out = x.out.released(x.work is not None and x.work.keep_output)

    def over_budget(self, head: Member, budget: int) -> list[Member]:
        """The followers to leave out of this batch's pass, with what hangs off them, so
        that the batch stays within `budget` bytes (`dag.fit_budget`), estimated from the
        head's output of the batch (nothing to cut when the head gives none)."""
        out = head.out
        if out is None or out.rows is None or not out.n:
            return []
        columns = len(head.ctx.progress.columns or {}) or 1
        batch = BatchBytes.measured(out.n, columns, len(out.rows))
        leading = [m.name for m in self.members if not m.follower]
        replayed = {m.name for m in self.members if m.claim is None}
        names = [m.name for m in self.followers()]
        kept = set(fit_budget(head.ctx.plan, leading, names, replayed, batch, budget))
        return [m for m in self.followers() if m.name not in kept]

    def open(
        self,
        conn,
        m: Member,
        run_id: str,
        settings: ExecutorSettings,
        connect_sandbox: Callable[[], Any],
    ) -> None:
        """Open a member's source, computation, sink and reject file (`m.work`); a fused or
        replayed member reads its upstream member's output, with that member's columns. An
        output that every step reading it reads inside the group, in memory, is not
        stored. A member with an attempt and no checkpoint starts fresh, fenced."""
        fed_names = {g.name for g in self.members if g.upstream is not None}
        s, ctx = settings, m.ctx
        step, cp = ctx.step, ctx.progress.checkpoint or {}
        env = StepEnv(
            run_id=run_id,
            data_dir=s.data_dir,
            export_dir=s.export_dir,
            reject_dir=s.reject_dir,
            state_conn=conn,
            sandbox_connect=connect_sandbox,
            upstream=ctx.upstream,
        )
        if m.upstream is not None:
            up = m.upstream
            source = FusedSource(step, up.ctx.progress.columns or up.work.compute.output_columns)
        else:
            source = build_source(step, env, ctx.progress.columns)
        compute = build_compute(step, source)
        if cp.get("state") is not None:
            compute.restore(cp["state"], read_state_parts(conn, run_id, step.name, cp["state"]))
        dependents = ctx.plan.dependents(step.name)
        has_output = step.type != "export" or bool(dependents)
        # Not stored when every step that reads it is fed inside the group, in memory.
        outside = not dependents or any(d not in fed_names for d in dependents)
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
            _start_fresh(conn, m.claim, work, s)
        elif work.sink is not None:
            work.sink.start(fresh=False, chunks=work.chunks, records=ctx.progress.records_out)

    def rewind(self, conn, claim: Claim, ctx: StepContext) -> None:
        """Before a pass (the first, or one after a take-back): every member back at its
        committed checkpoint, its parts to be opened again; the claimed step's context is
        `ctx`, a replayed member recomputes from its start."""
        for m in self.members:
            m.work = None
            if m.claim == claim:
                m.ctx = ctx
            elif m.claim is not None:
                m.ctx = load_context(conn, claim.run_id, m.name)
            else:
                m.ctx = replace(m.ctx, progress=fresh_progress(m.ctx.progress.columns))

    def discard_exports(self) -> None:
        """A canceled run: the exports of the members with an attempt never become visible."""
        for m in self.members:
            if m.work is not None and m.work.sink is not None and m.claim is not None:
                m.work.sink.discard()

    def close_exports(self) -> None:
        """The attempt is over: every member's export closed."""
        for m in self.members:
            if m.work is not None and m.work.sink is not None:
                m.work.sink.close()

    @classmethod
    def form(
        cls,
        conn,
        claim: Claim,
        ctx: StepContext,
        heartbeat: Heartbeat,
        settings: ExecutorSettings,
    ) -> Group:
        """The claimed step's group, in order: the upstream steps it must recompute (their
        output was not kept), the step, and the pending followers it adopts: each gets an
        attempt of its own, claimed by us, in one fenced transaction (`dag.fusion_group`),
        and its lease rides on `heartbeat` from now on."""
        s, plan, run_id = settings, ctx.plan, claim.run_id
        with conn.cursor() as cur:
            states, aligned = _lock_steps(cur, plan, run_id)
            names = fusion_group(plan, claim.step_name, states, aligned) if s.fusion else ()
            fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
            adopted = _adopt(cur, plan, claim, names, s)
        conn.commit()
        lineage.steps_started(adopted.values())
        head = Member(ctx, claim, head=True)
        group = cls(_replayed(conn, run_id, ctx, head))
        group.members.append(head)
        by_name = {claim.step_name: head}
        for name, follower in adopted.items():
            heartbeat.follow(follower.attempt_id, extra_age_s=s.step_timeout_s)
            upstream = by_name[plan.step(name).depends_on[0]]
            member = Member(load_context(conn, run_id, name), follower, upstream)
            by_name[name] = member
            group.members.append(member)
            log.info(
                "step fused",
                extra={"run_id": run_id, "step": name, "attempt": follower.number},
            )
        return group


def _lock_steps(cur, plan: Plan, run_id: str) -> tuple[dict[str, str], set[str]]:
    """Lock the run's steps in the advancer's order; return their states and the steps
    that have read exactly the output batches their one upstream step committed (only
    those can go on fed from it in memory)."""
    cur.execute(QUERIES["lock_run_steps"], {"run_id": run_id})
    states: dict[str, str] = {}
    checkpoints: dict[str, dict | None] = {}
    batches: dict[str, int] = {}
    for name, status, checkpoint, n_batches in cur.fetchall():
        states[name], checkpoints[name], batches[name] = status, checkpoint, n_batches
    aligned = {
        name
        for name, checkpoint in checkpoints.items()
        if len(plan.step(name).depends_on) == 1
        and _fused_position(checkpoint) == batches[plan.step(name).depends_on[0]]
    }
    return states, aligned


def _adopt(
    cur, plan: Plan, claim: Claim, names: Iterable[str], s: ExecutorSettings
) -> dict[str, Claim]:
    """Adopt the `names` (in order) whose upstream is in the group and that are still
    pending, each with a fused attempt claimed by us; returns their claims by step, in
    that order."""
    adopted: dict[str, Claim] = {}
    for name in names:
        keys = {"run_id": claim.run_id, "name": name}
        upstream = plan.step(name).depends_on[0]
        if upstream != claim.step_name and upstream not in adopted:
            continue
        # not adopted where its earlier attempts' chunks are not seen: it waits (pending)
        cur.execute(QUERIES["adopt_step"], {**keys, "owner": s.owner})
        if cur.fetchone() is None:
            continue
        params = {**keys, "head": claim.attempt_id, "owner": s.owner, "ttl_s": s.lease_ttl_s}
        cur.execute(QUERIES["create_fused_attempt"], params)
        attempt_id, number = cur.fetchone()
        adopted[name] = Claim(
            attempt_id, claim.run_id, name, number, claim.trace_id, claim.pipeline_id
        )
    return adopted


def _replayed(conn, run_id: str, ctx: StepContext, head: Member) -> list[Member]:
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


def _start_fresh(conn, claim: Claim, work: StepWork, s: ExecutorSettings) -> None:
    """A step starting from scratch drops what an attempt that committed nothing left
    behind (staging rows, chunks, output batches). All of it happens while our fence
    holds the attempt row, so a stale executor waking up here cannot wipe what the
    attempt that replaced it has written: its fence fails first."""
    with conn.cursor() as cur:
        fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
        if work.sink is not None:
            work.sink.start(fresh=True)
        work.rejects.discard()
        cur.execute(
            QUERIES["delete_step_batches"], {"run_id": claim.run_id, "name": claim.step_name}
        )
    conn.commit()


def _fused_position(checkpoint: dict | None) -> int | None:
    """How many output batches of its one upstream step a step has read (0 before its
    first); None when its checkpoint is not such a position (it read them all, or it reads
    a file, a table or several steps)."""
    if checkpoint is None:
        return 0
    if checkpoint.get("dep") == 0 and "seq" in checkpoint:
        return int(checkpoint["seq"])
    return None
