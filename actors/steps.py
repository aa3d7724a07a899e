"""What each step type reads, computes and writes, batch by batch, from a checkpoint.

A step is a source of input batches (an ingest's, by its source: `actors.sources`; else the
committed outputs of its dependencies in `depends_on` order), a per-batch computation
(typing, a transform, or a pass-through) and, for exports, an external sink written before
the batch's checkpoint commits (by its target: `actors.targets`). Every position a source
yields is JSON (it goes into the checkpoint) and resuming from it yields exactly the
remaining input."""

from __future__ import annotations

from collections.abc import Iterator

from actors.outputs import decode_rows, read_batches
from actors.sources import FileSource, TableSource, source_impl
from actors.stepio import InputBatch, Sink, StepEnv
from actors.targets import FileSink, TableSink, target_impl
from dag import ConfigValueError, RowError, Step, Transform, build_transform

# What other modules import from here (each defined in its own module).
__all__ = [
    "FileSink",
    "FileSource",
    "FusedSource",
    "InputBatch",
    "Passthrough",
    "Sink",
    "StepEnv",
    "TableSink",
    "TableSource",
    "UpstreamSource",
    "build_compute",
    "build_sink",
    "build_source",
    "compute_batch",
]


class UpstreamSource:
    """The committed outputs of the step's dependencies, in `depends_on` order."""

    def __init__(self, step: Step, env: StepEnv):
        self.step = step
        self.env = env
        self.columns: dict[str, str] = {}
        for dep in step.depends_on:
            dep_columns, _ = env.upstream[dep]
            for name, typ in dep_columns.items():
                if self.columns.setdefault(name, typ) != typ:
                    raise ConfigValueError(
                        f"column {name!r} is {self.columns[name]} in one dependency and "
                        f"{typ} in {dep!r}",
                        column=name,
                    )

    @property
    def input_digest_of(self) -> str | None:
        """With one dependency, this step's input digest IS that step's output digest
        (the same records in the same order), so it is taken, not recomputed."""
        return self.step.depends_on[0] if len(self.step.depends_on) == 1 else None

    def batches(self, checkpoint: dict | None, records_before: int) -> Iterator[InputBatch]:
        derived = self.input_digest_of is not None
        dep_index = (checkpoint or {}).get("dep", 0)
        seq = (checkpoint or {}).get("seq", 0)
        names = list(self.columns)
        for i in range(dep_index, len(self.step.depends_on)):
            dep = self.step.depends_on[i]
            dep_columns, count = self.env.upstream[dep]
            start = seq if i == dep_index else 0
            same = list(dep_columns) == names
            for s, rows in read_batches(
                self.env.state_conn, self.env.run_id, dep, start_seq=start, count=count
            ):
                records = decode_rows(rows, dep_columns)
                if not same:
                    records = [{n: r.get(n) for n in names} for r in records]
                after = {"dep": i, "seq": s + 1}
                if s + 1 == count:
                    after = {"dep": i + 1, "seq": 0}
                yield InputBatch(
                    records, [], len(records), after, not derived, rows=rows if same else None
                )


class FusedSource:
    """The input of a fused follower: its upstream member's output batches, handed over in
    memory by the group's run (`actors.runner`) instead of read back from storage."""

    def __init__(self, step: Step, columns: dict[str, str]):
        self.step = step
        self.columns = dict(columns)

    @property
    def input_digest_of(self) -> str:
        """Its input digest IS its one upstream step's output digest (as `UpstreamSource`)."""
        return self.step.depends_on[0]


class Passthrough(Transform):
    """The computation of an ingest (typing already happened in its source) and of an
    export: the identity, with the source's columns (an ingest's are decided on its first
    batch, hence read on demand)."""

    def __init__(self, source):
        self.source = source

    @property
    def output_columns(self) -> dict[str, str]:
        return dict(self.source.columns or {})

    def apply(self, records: list[dict], first_ordinal: int) -> tuple[list[dict], list[RowError]]:
        return records, []  # no copy: nothing mutates a batch in place


def build_source(
    step: Step, env: StepEnv, columns: dict[str, str] | None, limit: int | None = None
):
    """The input of `step` (an ingest's: its first `limit` records only, for a preview)."""
    if step.type == "ingest":
        return source_impl(step.config).reader(step, env, columns, limit)
    return UpstreamSource(step, env)


def compute_batch(
    compute: Transform, batch: InputBatch, first_ordinal: int
) -> tuple[list[dict], list[RowError]]:
    """One input batch through the step's computation: its output records and its row
    errors, the reading errors first. A run and a preview both call this."""
    out, errors = compute.apply(batch.records, first_ordinal)
    return out, [*batch.row_errors, *errors]


def build_compute(step: Step, source):
    """The per-batch computation of `step` over its source's columns."""
    if step.type in ("ingest", "export"):
        return Passthrough(source)
    return build_transform(step.config, source.columns)


def build_sink(step: Step, env: StepEnv, columns: dict[str, str]) -> Sink | None:
    """The external output of an export step, by its target; None for other steps."""
    if step.type != "export":
        return None
    return target_impl(step.config).sink(step, env, columns)
