"""A step's progress as committed in `step_runs`, and what an attempt loads and opens to
go on from it: the executor's bookkeeping of counters, running digests, column types, shown
row errors and the checkpoint, batch by batch (`actors.attempt` drives it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import psycopg2.extras

from actors.outputs import columns_from_db, columns_to_db
from actors.sql import QUERIES
from actors.steps import InputBatch
from dag import DIGEST_SEED, Plan, Step, Transform, chain_bytes, chain_rows, encode_rows, parse_plan

MAX_ROW_ERRORS_SHOWN = 20


@dataclass
class Progress:
    """A step's committed progress, as in `step_runs`. `batches` counts its output batches
    (stored or not); `output_kept` says whether every one of them is stored."""

    checkpoint: dict | None
    columns: dict[str, str] | None
    records_in: int
    records_out: int
    rejected: int
    input_digest: str
    output_digest: str
    batches: int
    row_errors: list[dict]
    output_kept: bool = True
    # The part of the computation's state that the last batch stores with its checkpoint
    # (index, bytes: an aggregate's; `dag.Transform.checkpoint`), None: none.
    state_part: tuple[int, bytes] | None = None

    def values(self, step: str) -> dict[str, Any]:
        """The `step_runs` values of this progress, JSON columns as Python values."""
        return {
            "name": step,
            "checkpoint": self.checkpoint,
            "records_in": self.records_in,
            "records_out": self.records_out,
            "rejected": self.rejected,
            "input_digest": self.input_digest,
            "output_digest": self.output_digest,
            "batches": self.batches,
            "columns": None if self.columns is None else [[n, t] for n, t in self.columns.items()],
            "row_errors": self.row_errors,
            "output_kept": self.output_kept,
        }

    def params(self, run_id: str, step: str) -> dict[str, Any]:
        """The `save_checkpoint` parameters."""
        return {
            **self.values(step),
            "run_id": run_id,
            "checkpoint": json.dumps(self.checkpoint),
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
        state, self.state_part = work.compute.checkpoint()
        self.checkpoint = {
            **batch.position,
            "n": work.n_batches,
            "chunks": work.chunks,
            "reject_chunks": work.reject_chunks,
            "state": state,
        }
        return rows


@dataclass(frozen=True)
class StepContext:
    """What an attempt loads before it runs: the plan, its step, the committed progress and
    the upstream outputs (name -> (columns, batch count), name -> output digest), and the
    run's succeeded steps whose output is not stored."""

    plan: Plan
    step: Step
    progress: Progress
    upstream: dict[str, tuple[dict[str, str] | None, int]]
    upstream_digests: dict[str, str]
    unkept: frozenset[str] = frozenset()


@dataclass
class StepWork:
    """An attempt's open parts and its place in them (export chunks, reject chunks and
    batches done so far, all part of the checkpoint). `keep_output`: its output batches
    are stored (a step outside its group reads them); `has_output`: it counts them."""

    source: Any
    compute: Transform
    sink: Any
    rejects: Any
    keep_output: bool
    has_output: bool
    chunks: int
    reject_chunks: int
    n_batches: int


def load_context(conn, run_id: str, name: str) -> StepContext:
    """The run's plan, the step's committed progress and its upstream outputs."""
    keys = {"run_id": run_id, "name": name}
    with conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        cur.execute(QUERIES["get_step_context"], keys)
        row = cur.fetchone()
        plan = parse_plan(row["plan"])
        step = plan.step(name)
        names = list(step.depends_on)
        cur.execute(QUERIES["get_upstream_outputs"], {"run_id": run_id, "names": names})
        upstream = cur.fetchall()
        cur.execute(QUERIES["list_unkept_outputs"], {"run_id": run_id})
        unkept = frozenset(r["name"] for r in cur.fetchall())
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
        output_kept=row["output_kept"],
    )
    return StepContext(
        plan=plan,
        step=step,
        progress=progress,
        upstream={u["name"]: (columns_from_db(u["columns"]), u["batches"]) for u in upstream},
        upstream_digests={u["name"]: u["output_digest"] for u in upstream},
        unkept=unkept,
    )


def fresh_progress(columns: dict[str, str] | None) -> Progress:
    """The progress of a step recomputed from its start (a replayed member)."""
    return Progress(None, columns, 0, 0, 0, DIGEST_SEED, DIGEST_SEED, 0, [])
