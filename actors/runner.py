"""The executor's side of a step attempt: claim, run batch by batch, commit fenced.

For every input batch the executor computes the output, writes exports and reject rows (each
idempotent per batch number and invisible until the step commits), then commits the output
batch, the checkpoint (input position, counters, running digests, aggregate state) in ONE
transaction that starts with the lease fence. A crash re-runs only the unfinished batch; a
stale executor's commit changes nothing."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras
from dramatiq.middleware.time_limit import TimeLimitExceeded

import connectors
from actors.errors import ExecutorStopping, LeaseLost, StepCanceled, StepTimeout
from actors.faults import Faults
from actors.leases import Claim, Heartbeat, claim_attempt, fence
from actors.outputs import columns_from_db, columns_to_db, commit_batch, write_batch
from actors.sql import QUERIES
from actors.steps import (
    InputBatch,
    StepEnv,
    build_compute,
    build_sink,
    build_source,
    compute_batch,
)
from dag import (
    BATCH_SIZE,
    DIGEST_SEED,
    AttemptOutcome,
    Plan,
    RowValueError,
    Step,
    StepStatus,
    Transform,
    chain_bytes,
    chain_rows,
    decide_retry,
    encode_rows,
    is_input_data_error,
    parse_plan,
)
from dag.plan import ON_ROW_ERROR_STOP
from ddl import connection_lost

log = logging.getLogger("etl.executor")
MAX_ROW_ERRORS_SHOWN = 20
# What `run_attempt` answers when a fence found the attempt taken over (not an outcome).
LEASE_LOST = "lease_lost"
# Pauses between tries to reach a database that went away (restart, terminated sessions).
MAX_TAKE_BACKS = 10  # per attempt
RECONNECT_WAITS_S = (0.2, 0.5, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0)


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


@dataclass
class Progress:
    """A step's committed progress, as in `step_runs`."""

    checkpoint: dict | None
    columns: dict[str, str] | None
    records_in: int
    records_out: int
    rejected: int
    input_digest: str
    output_digest: str
    batches: int
    row_errors: list[dict]

    def params(self, run_id: str, step: str) -> dict[str, Any]:
        return {
            "run_id": run_id,
            "name": step,
            "checkpoint": json.dumps(self.checkpoint),
            "records_in": self.records_in,
            "records_out": self.records_out,
            "rejected": self.rejected,
            "input_digest": self.input_digest,
            "output_digest": self.output_digest,
            "batches": self.batches,
            "columns": columns_to_db(self.columns),
            "row_errors": json.dumps(self.row_errors),
        }

    def advance(
        self, batch: InputBatch, out: list[dict], errors: list, work: StepWork
    ) -> bytes | None:
        """Count one processed batch in: counters, running digests, types, shown row errors
        and the checkpoint to resume after it. Returns the output's `encode_rows` bytes
        (None for no output): the digest covers them and they are what is stored."""
        self.records_in += batch.records_in
        self.records_out += len(out)
        self.rejected += len(errors)
        names_in = list(work.source.columns or {})
        rows_in = batch.rows
        if batch.raw_bytes is not None:
            self.input_digest = chain_bytes(self.input_digest, batch.raw_bytes)
        elif batch.digest_records:
            rows_in = rows_in if rows_in is not None else encode_rows(batch.records, names_in)
            self.input_digest = chain_rows(self.input_digest, names_in, rows_in)
        self.columns = work.compute.output_columns
        names = list(self.columns)
        if not out:
            rows = None
        elif out is batch.records and rows_in is not None and names == names_in:
            rows = rows_in  # passed on unchanged: the bytes it read are the bytes it gives
        else:
            rows = encode_rows(out, names)
        self.output_digest = chain_rows(self.output_digest, names, rows)
        room = MAX_ROW_ERRORS_SHOWN - len(self.row_errors)
        self.row_errors += [e.as_dict() for e in errors[: max(room, 0)]]
        self.checkpoint = {
            **batch.position,
            "n": work.n_batches,
            "chunks": work.chunks,
            "reject_chunks": work.reject_chunks,
            "state": work.compute.state(),
        }
        return rows


@dataclass(frozen=True)
class StepContext:
    """What an attempt loads before it runs: the plan, its step, the committed progress and
    the upstream outputs (name -> (columns, batch count) and name -> output digest)."""

    plan: Plan
    step: Step
    progress: Progress
    upstream: dict[str, tuple[dict[str, str] | None, int]]
    upstream_digests: dict[str, str]


@dataclass
class StepWork:
    """An attempt's open parts and its place in them (export chunks, reject chunks and
    batches done so far, all part of the checkpoint)."""

    source: Any
    compute: Transform
    sink: Any
    rejects: Any
    keep_output: bool
    chunks: int
    reject_chunks: int
    n_batches: int


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
        with heartbeat:
            outcome, delay_ms = self._run_claimed(claim, heartbeat, ctx)
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

    def _run_claimed(self, claim: Claim, heartbeat: Heartbeat, ctx: dict) -> tuple[str, int | None]:
        """The claimed attempt to its outcome (and the retry delay, if any). A lost session
        is not the attempt's failure: the executor takes its attempt back, fenced, as soon
        as the database answers and goes on from the last committed checkpoint, instead of
        the step waiting out the lease. A step that loses its session again and again is
        left to its lease, like one that kills its executor (the reaper's poison guard)."""
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
                log.warning("attempt %s: %s", outcome, exc, extra=ctx)
                return outcome, delay_ms
        return LEASE_LOST, None

    def _take_back(self, claim: Claim, heartbeat: Heartbeat, ctx: dict) -> bool:
        """After a lost session: reconnect and fence our attempt in a transaction of its
        own. True when the attempt is still ours (go on from the checkpoint); False when
        the lease was taken over, or the database stayed away until the executor stopped
        or the step ran out of time (the reaper hands the step over then)."""
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
        """Load the step's context, run its remaining batches, complete it: the attempt's
        whole life between claim and outcome."""
        ctx = self._load_context(conn, claim)
        self.settings.faults.at_attempt_start(ctx.step.name, claim.number)
        work = self._open(conn, claim, ctx)
        try:
            if ctx.progress.checkpoint is None:
                self._start_fresh(conn, claim, work.sink, work.rejects)
            elif work.sink is not None:
                work.sink.start(fresh=False)
            started = self._clock()
            for batch in work.source.batches(ctx.progress.checkpoint, ctx.progress.records_in):
                self._check(heartbeat, started)
                if batch.records_in > 0:
                    self._run_batch(conn, claim, ctx, work, batch, heartbeat)
            self._check(heartbeat, started)
            self._complete(conn, claim, ctx, work)
        except StepCanceled:
            if work.sink is not None:
                work.sink.discard()  # a canceled step's export never becomes visible
            raise
        finally:
            if work.sink is not None:
                work.sink.close()

    def _load_context(self, conn, claim: Claim) -> StepContext:
        """The run's plan, the step's committed progress and its upstream outputs."""
        keys = {"run_id": claim.run_id, "name": claim.step_name}
        with conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute(QUERIES["get_step_context"], keys)
            row = cur.fetchone()
            plan = parse_plan(row["plan"])
            step = plan.step(claim.step_name)
            names = list(step.depends_on)
            cur.execute(QUERIES["get_upstream_outputs"], {"run_id": claim.run_id, "names": names})
            upstream = cur.fetchall()
        conn.rollback()
        progress = Progress(
            checkpoint=row["checkpoint"],
            columns=columns_from_db(row["columns"]),
            records_in=row["records_in"],
            records_out=row["records_out"],
            rejected=row["rejected"],
            input_digest=row["input_digest"] or DIGEST_SEED,
            output_digest=row["output_digest"] or DIGEST_SEED,
            batches=row["batches"],
            row_errors=list(row["row_errors"] or []),
        )
        return StepContext(
            plan=plan,
            step=step,
            progress=progress,
            upstream={u["name"]: (columns_from_db(u["columns"]), u["batches"]) for u in upstream},
            upstream_digests={u["name"]: u["output_digest"] for u in upstream},
        )

    def _open(self, conn, claim: Claim, ctx: StepContext) -> StepWork:
        """The step's source, computation, sink and reject file, resumed at its checkpoint."""
        s = self.settings
        env = StepEnv(
            run_id=claim.run_id,
            data_dir=s.data_dir,
            export_dir=s.export_dir,
            reject_dir=s.reject_dir,
            state_conn=conn,
            sandbox_connect=self._connect_sandbox,
            upstream=ctx.upstream,
        )
        step, cp = ctx.step, ctx.progress.checkpoint or {}
        source = build_source(step, env, ctx.progress.columns)
        compute = build_compute(step, source)
        if cp.get("state") is not None:
            compute.restore(cp["state"])
        return StepWork(
            source=source,
            compute=compute,
            sink=build_sink(step, env, source.columns) if step.type == "export" else None,
            rejects=connectors.reject_file(s.reject_dir, claim.run_id, step.name),
            keep_output=step.type != "export" or bool(ctx.plan.dependents(step.name)),
            chunks=cp.get("chunks", 0),
            reject_chunks=cp.get("reject_chunks", 0),
            n_batches=cp.get("n", 0),
        )

    def _run_batch(
        self, conn, claim: Claim, ctx: StepContext, work: StepWork, batch, heartbeat: Heartbeat
    ) -> None:
        """One input batch: compute, write the export chunk and rejects (invisible until the
        step commits), then commit output + checkpoint behind the fence."""
        s, step, progress = self.settings, ctx.step, ctx.progress
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
        if errors and ctx.plan.on_row_error == ON_ROW_ERROR_STOP:
            e = errors[0]
            raise RowValueError(e.reason, line=e.line, column=e.column)
        if errors:
            work.rejects.write_chunk(work.reject_chunks, connectors.encode_rejects(errors))
            work.reject_chunks += 1
        work.n_batches += 1
        s.faults.after_export(step.name, work.n_batches, claim.number)
        rows = progress.advance(batch, out, errors, work)
        seq, keep = progress.batches, work.keep_output and rows is not None
        progress.batches += keep
        fenced = {"attempt_id": claim.attempt_id, "owner": s.owner, "ttl_s": s.lease_ttl_s}
        with conn.cursor() as cur:
            params = progress.params(claim.run_id, step.name)
            cancel = commit_batch(cur, fenced, params, seq, len(out), rows if keep else None)
        conn.commit()
        if cancel:
            heartbeat.cancel.set()

    def _complete(self, conn, claim: Claim, ctx: StepContext, work: StepWork) -> None:
        """After the last batch: the computation's final records (aggregates), publish the
        export and the reject file, and commit the step as succeeded behind the fence."""
        s, step, progress = self.settings, ctx.step, ctx.progress
        digest_of = getattr(work.source, "input_digest_of", None)
        if digest_of is not None:
            progress.input_digest = ctx.upstream_digests[digest_of]
        final = work.compute.finish()
        progress.columns = work.compute.output_columns
        names = list(progress.columns)
        parts = [final[i : i + BATCH_SIZE] for i in range(0, len(final), BATCH_SIZE)]
        encoded = [(len(part), encode_rows(part, names)) for part in parts]
        for _, rows in encoded:
            progress.output_digest = chain_rows(progress.output_digest, names, rows)
        progress.records_out += len(final)
        if work.sink is not None:
            location = work.sink.publish(work.chunks)
            log.info(
                "export published to %s",
                location,
                extra={"run_id": claim.run_id, "step": step.name},
            )
        if work.reject_chunks:
            work.rejects.publish(work.reject_chunks)
        with conn.cursor() as cur:
            fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
            for n_records, rows in encoded:
                write_batch(cur, claim.run_id, step.name, progress.batches, n_records, rows)
                progress.batches += 1
            cur.execute(QUERIES["save_checkpoint"], progress.params(claim.run_id, step.name))
            self._finish(
                cur, claim, AttemptOutcome.SUCCEEDED, None, step_status=StepStatus.SUCCEEDED
            )
        conn.commit()

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

    def _check(self, heartbeat: Heartbeat, started: float) -> None:
        """Batch-boundary checks: lease, cancel, shutdown, timeout."""
        if heartbeat.lost.is_set():
            raise LeaseLost("heartbeat found the lease taken over")
        if heartbeat.cancel.is_set():
            raise StepCanceled("run canceled")
        if self.stopping.is_set():
            raise ExecutorStopping("executor is stopping")
        elapsed = self._clock() - started
        if elapsed > self.settings.step_timeout_s:
            raise StepTimeout(
                f"step timed out after {elapsed:.1f} s (limit {self.settings.step_timeout_s:g} s)"
            )

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
        at once instead of after the lease TTL."""
        s = self.settings
        try:
            with conn.cursor() as cur:
                fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
                self._finish(
                    cur, claim, AttemptOutcome.RELEASED, "executor stopped", step_status=None
                )
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
                cur.execute(QUERIES["count_failed_attempts"], keys)
                failures = cur.fetchone()[0] + 1
                cur.execute(QUERIES["get_run_plan"], keys)
                step = parse_plan(cur.fetchone()[0]).step(claim.step_name)
                decision = decide_retry(exc, failures, step.max_attempts)
                self._finish(cur, claim, outcome, error, step_status=None)
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
            conn.commit()
        except LeaseLost:
            conn.rollback()
            return LEASE_LOST, None
        return outcome, (int(decision.delay_s * 1000) if decision.retry else None)


def _rollback(conn) -> None:
    """Roll back; a session that is already gone has nothing to roll back."""
    try:
        conn.rollback()
    except psycopg2.Error as exc:
        if not connection_lost(exc):
            raise
