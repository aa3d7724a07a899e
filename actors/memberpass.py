"""One member of a fused group over one input batch, and at its end: compute, write the
export chunk and the rejects (each invisible until the step commits) or keep a table
export's rows for the batch's commit, advance the member's progress; the batch's one
commit of every member; then a member's final records, digests and the publish of its
export and reject file (`actors.attempt` drives the pass, `actors.group` holds the
members)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import connectors
from actors.committer import BatchCommitter, StepCommit
from actors.faults import Faults
from actors.group import Group, Member, MemberOutput
from actors.settings import ExecutorSettings
from actors.steps import InputBatch, compute_batch
from actors.tracing import AttemptSpans
from dag import BATCH_SIZE, RowValueError, chain_rows, encode_rows
from dag.plan import ON_ROW_ERROR_STOP

log = logging.getLogger("etl.executor")


def process_batch(
    m: Member,
    batch: InputBatch,
    faults: Faults,
    defer: bool,
    wait_commits: Callable[[], None],
) -> None:
    """One member's batch: compute, write the export chunk and rejects (invisible until
    the step commits) or, with `defer`, keep a table export's rows for the batch's commit
    (`m.staged`), count it in its progress. `wait_commits` waits for the batch in flight."""
    step, progress, work = m.ctx.step, m.ctx.progress, m.work
    faults.before_batch(step.name)
    first = progress.records_in + 1
    out, errors = compute_batch(work.compute, batch, first)
    if work.sink is not None:
        if defer and work.sink.stages_in_commit:
            m.staged = work.sink.defer(work.chunks, out, first)
            if m.staged is None:
                # Staged apart, this batch must not overtake the one in flight: a key both
                # hold goes to the earlier batch, as it does when each is staged in turn.
                wait_commits()
        sink_errors = [] if m.staged is not None else work.sink.write(work.chunks, out, first)
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
    if m.claim is not None:  # a crash here finds the batches before this one committed
        faults.after_export(step.name, work.n_batches, m.claim.number, wait_commits)
    if m.checks is not None:
        own = out is batch.records  # a file ingest's own records: their lines and file
        lines, file = (batch.lines, batch.file) if own else (None, None)
        m.checks.observe(out, work.compute.output_columns, progress.records_out + 1, lines, file)
    rows = progress.advance(batch, out, errors, work)
    if m.checks is not None:
        m.checks.save(progress.checkpoint)
    m.done = True
    if rows is not None:
        m.out = MemberOutput(out, rows, progress.batches, len(out))
        if work.has_output:
            progress.batches += 1
            progress.output_kept = progress.output_kept and (
                work.keep_output or not m.ctx.plan.dependents(step.name)
            )


def commit_batch(
    conn, committer: BatchCommitter, group: Group, run_id: str, s: ExecutorSettings
) -> bool:
    """The batch's one transaction: the table rows its members defer, then every member
    that processed it commits its output (when kept) and checkpoint, each behind its own
    fence, in one statement; sent by `committer` (maybe still in flight on return).
    Returns the run's cancel flag as a commit that finished saw it."""
    steps, staged = [], []
    for m in group.members:
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


def finish_member(conn, m: Member, spans: AttemptSpans) -> None:
    """A member's end: its input digest (its upstream's output digest), final records, the
    verdict of its checks (`actors.checks`: a failed one raises before anything is
    published), export (in its span) and reject file published."""
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
    if m.checks is not None:
        m.checks.observe(final, progress.columns, progress.records_out + 1)
    progress.records_out += len(final)
    if m.checks is not None:
        m.checks.verdict(conn, progress.records_in, progress.records_out, progress.rejected)
    if work.sink is not None:
        target = str(step.config.get("target", "file"))
        with spans.export(m.claim, target, progress.records_out) as span:
            location = work.sink.publish(work.chunks, progress.records_out)
            span.set_attribute("etl.export.location", location)
            log.info(
                "export published to %s",
                location,
                extra={"run_id": m.claim.run_id, "step": step.name},
            )
    if work.reject_chunks:
        work.rejects.publish(work.reject_chunks)
