"""What each step type reads, computes and writes, batch by batch, from a checkpoint.

A step is a source of input batches (a file, a sandbox table, or the committed outputs of
its dependencies in `depends_on` order), a per-batch computation (typing, a transform, or a
pass-through) and, for exports, an external sink written before the batch's checkpoint
commits. Every position a source yields is JSON (it goes into the checkpoint) and resuming
from it yields exactly the remaining input."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import connectors
from actors.committer import StagedRows
from actors.cursors import step_window
from actors.outputs import decode_rows, read_batches
from actors.schemadrift import meet_schema
from dag import (
    BATCH_SIZE,
    MAX_SOURCE_BYTES,
    ColumnInference,
    ColumnRecords,
    ConfigValueError,
    Position,
    RawBatch,
    RawRecord,
    RowError,
    Step,
    Transform,
    build_transform,
    null_out,
    read_csv_batches,
    read_json_batches,
    read_jsonl_batches,
    type_records,
)


@dataclass
class InputBatch:
    """One input batch: typed records, the row errors found reading it, its size and the
    position to resume after it, and what its input digest covers: the raw bytes of a file
    ingest, else the records (`digest_records`), else nothing (the step takes its input
    digest from its one upstream step). `rows` are the records' `dag.encode_rows` bytes in
    the source's column order when the source read them in that form (a stored batch)."""

    records: list[dict]
    row_errors: list[RowError]
    records_in: int
    position: dict[str, Any]
    digest_records: bool = False
    raw_bytes: bytes | None = None
    rows: bytes | None = None
    lines: Sequence[int] | None = None  # a file's: where each of `records` starts
    file: str | None = None  # a glob ingest's: the file of `records`, as `paths` names it


@dataclass
class StepEnv:
    """What a step may touch besides its own state: directories and connections."""

    run_id: str
    data_dir: Path
    export_dir: Path
    reject_dir: Path
    state_conn: Any
    sandbox_connect: Callable[[], Any]
    upstream: dict[str, tuple[dict[str, str], int]] = field(default_factory=dict)


class FileSource:
    """Ingest from a file in the data directory, typed as declared or inferred.

    Undeclared columns are inferred from every value of the file (`dag.ColumnInference`, a
    pass over it before the first batch), so no record is rejected for an inferred type; a
    resumed attempt gets the types its step recorded. `null_values` are null before
    inference and typing. With `limit` (a preview) it reads only the first `limit` input
    records after inferring over the whole file as a run does, and a cut batch has no
    resumable position."""

    def __init__(
        self, step: Step, env: StepEnv, columns: dict[str, str] | None, limit: int | None = None
    ):
        self.config = step.config
        self.step_name = step.name
        self.env = env
        self.columns = columns
        self.limit = limit
        self.nulls = tuple(step.config.get("null_values") or ())
        self.evidence: dict[str, str] = {}  # why each inferred column has its type
        self._paths: list[str] | None = None

    def _raw_batches(self, stream, start: Position) -> Iterator[RawBatch]:
        cfg = self.config
        fmt = cfg.get("format", "csv")
        if fmt == "csv":
            delimiter, quote = cfg.get("delimiter", ","), cfg.get("quote", '"')
            batches = read_csv_batches(
                stream, delimiter=delimiter, quote=quote, batch_size=BATCH_SIZE, start=start
            )
        elif fmt == "json":
            batches = read_json_batches(stream, batch_size=BATCH_SIZE, start=start)
        else:
            batches = read_jsonl_batches(stream, batch_size=BATCH_SIZE, start=start)
        for raw in batches:
            null_out(raw.records, self.nulls)
            yield raw

    @contextmanager
    def _open(self, rel_path: str) -> Iterator[BinaryIO]:
        """One input file behind the path guard, as UTF-8 (`connectors.decoded_source`)."""
        encoding = self.config.get("encoding", "utf-8")
        with (
            connectors.open_source(self.env.data_dir, rel_path, max_bytes=MAX_SOURCE_BYTES) as raw,
            connectors.decoded_source(raw, encoding, name=rel_path) as stream,
        ):
            yield stream

    def paths(self) -> list[str]:
        """The files the step reads, in order: its `path`, or every file its glob matches
        (`connectors.expand_source`), fixed at the first call of the attempt."""
        if self._paths is None:
            self._paths = connectors.expand_source(self.env.data_dir, self.config["path"])
        return self._paths

    def infer(self) -> dict[str, str]:
        """The columns' types from a pass over every input file (declared ones as declared);
        the files of a glob must share their header. A CSV file is read only until every
        undeclared column is a string (`ColumnInference.settled`): past its header and
        first batch nothing in a CSV file raises (malformed records are row errors), so
        the rest can change neither a type nor an error of this pass."""
        is_csv = self.config.get("format", "csv") == "csv"
        csv_delimiter = self.config.get("delimiter") if self.config.get("format") == "csv" else None
        inference = None
        for rel_path in self.paths():
            with self._open(rel_path) as stream:
                for raw in self._raw_batches(stream, Position.from_dict(None)):
                    if inference is None:
                        declared = self.config.get("columns") or {}
                        inference = ColumnInference(raw.header, declared, csv_delimiter)
                        header = list(raw.header)
                    elif raw.header and list(raw.header) != header:
                        raise ConfigValueError(
                            f"{rel_path}: its columns {list(raw.header)} differ from the first"
                            f" file's {header}: the files of a glob are one input"
                        )
                    inference.observe(raw.records)
                    if is_csv and inference.settled:
                        break  # every column a string, this file's header checked
        assert inference is not None  # a reader yields at least one batch, with the header
        self.evidence = inference.evidence()
        return inference.columns()

    def batches(self, checkpoint: dict | None, records_before: int) -> Iterator[InputBatch]:
        """The input from `checkpoint` on: the files in order, each from its start, the
        checkpoint's file (`file`, its index; 0 for one file) from its `position`."""
        first = int((checkpoint or {}).get("file", 0))
        start = Position.from_dict((checkpoint or {}).get("position"))
        if self.columns is None:
            self.columns = self.infer()
            if self.limit is None:  # a run's start, not a preview's
                meet_schema(
                    self.env.state_conn, self.env.run_id, self.step_name, self.config, self.columns
                )
        ordinal = records_before + 1
        paths = self.paths()
        for index, rel_path in enumerate(paths[first:], start=first):
            position = start if index == first else Position.from_dict(None)
            for batch in self._file_batches(rel_path, index, position, ordinal):
                if not batch.records_in and not batch.row_errors and index + 1 < len(paths):
                    continue  # a file resumed at its end, or only a header: the next one
                ordinal += batch.records_in
                yield batch
                if self.limit is not None and ordinal - 1 >= self.limit:
                    return

    def _file_batches(
        self, rel_path: str, index: int, start: Position, ordinal: int
    ) -> Iterator[InputBatch]:
        assert self.columns is not None
        with self._open(rel_path) as stream:
            offset = start.offset
            for raw in self._raw_batches(stream, start):
                if self.limit is not None and raw.size >= self.limit - (ordinal - 1):
                    records, row_errors = raw.head(self.limit - (ordinal - 1))
                    typed, type_errors = type_records(records, self.columns, first_ordinal=ordinal)
                    errors = sorted(
                        [*row_errors, *type_errors], key=lambda e: (e.line or 0, e.record or 0)
                    )
                    yield InputBatch(typed, errors, len(records) + len(row_errors), {})
                    return
                typed, type_errors = type_records(raw.records, self.columns, first_ordinal=ordinal)
                errors = sorted(
                    [*raw.row_errors, *type_errors], key=lambda e: (e.line or 0, e.record or 0)
                )
                # The input digest covers the file's raw bytes, batch by batch (a run's:
                # a preview has none, and spares a copy of the batch).
                size = raw.end.offset - offset
                raw_bytes = None if self.limit else os.pread(stream.fileno(), size, offset)
                offset = raw.end.offset
                ordinal += raw.size
                position: dict[str, Any] = {"position": raw.end.as_dict()}
                if index:
                    position["file"] = index
                lines = _typed_lines(raw.records, type_errors, ordinal - raw.size)
                file = None if rel_path == self.config["path"] else rel_path  # a glob's
                yield InputBatch(
                    typed, errors, raw.size, position, raw_bytes=raw_bytes, lines=lines, file=file
                )


def _typed_lines(
    records: Sequence[RawRecord], type_errors: list[RowError], first_ordinal: int
) -> Sequence[int]:
    """The first line of each record that typing kept (`records[i]`: ordinal
    `first_ordinal + i`; a type error names the ordinal of the record it left out)."""
    lines = records.lines() if isinstance(records, ColumnRecords) else [r.line for r in records]
    if not type_errors:
        return lines
    left_out = {e.record for e in type_errors}
    return [n for i, n in enumerate(lines) if first_ordinal + i not in left_out]


class TableSource:
    """Ingest from a sandbox table in primary-key order (keyset pagination); with `limit` (a
    preview) only its first `limit` rows. With a `cursor` column a run reads the window of
    its step (`actors.cursors`); a preview reads the table's first rows whatever the mark."""

    def __init__(
        self, step: Step, env: StepEnv, columns: dict[str, str] | None, limit: int | None = None
    ):
        self.config = step.config
        self.name = step.name
        self.env = env
        self.columns = columns
        self.limit = limit

    def batches(self, checkpoint: dict | None, records_before: int) -> Iterator[InputBatch]:
        conn = self.env.sandbox_connect()
        try:
            source = connectors.resolve_source_table(conn, self.config["table"])
            self.columns = self.columns or dict(source.columns)
            window = None
            if "cursor" in self.config and self.limit is None:
                window = step_window(
                    self.env.state_conn, conn, self.env.run_id, self.name, source,
                    self.config["cursor"],
                )  # fmt: skip
            after = (checkpoint or {}).get("after_key")
            left = self.limit
            for records, last_key in connectors.read_table_batches(
                conn, source, after_key=after, batch_size=BATCH_SIZE, window=window
            ):
                position = {"after_key": last_key}
                if left is not None and len(records) >= left:
                    yield InputBatch(records[:left], [], left, {}, digest_records=True)
                    return
                if left is not None:
                    left -= len(records)
                yield InputBatch(records, [], len(records), position, digest_records=True)
        finally:
            conn.close()


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


class FileSink:
    """An export to `ETL_EXPORT_DIR/<run_id>/<path>`, published when the step commits."""

    stages_in_commit = False  # a chunk is a file, written by `write`

    def __init__(self, step: Step, env: StepEnv, columns: dict[str, str]):
        self.format = step.config.get("format", "jsonl")
        self.columns = columns
        self.file = connectors.export_file(
            env.export_dir, env.run_id, step.name, step.config["path"]
        )

    def close(self) -> None:
        pass

    def start(self, *, fresh: bool, chunks: int = 0, records: int = 0) -> None:
        """Begin an attempt: from scratch (leftovers of an attempt that committed nothing
        go), or after `chunks` committed chunks (`ChunkMissing` if one is gone)."""
        if fresh:
            self.file.discard()
        else:
            self.file.staged(chunks)

    def write(self, chunk: int, records: list[dict], first_ordinal: int) -> list[RowError]:
        if self.format == "csv":
            data = connectors.encode_csv(records, self.columns, header=chunk == 0)
        else:
            data = connectors.encode_jsonl(records)
        self.file.write_chunk(chunk, data)
        return []

    def discard(self) -> None:
        self.file.discard()

    def publish(self, chunks: int, records: int) -> str:
        """Publish the committed chunks, refusing (`StagedOutputLost`) a file that would hold
        another number of records than the step committed."""
        if chunks == 0 and self.format == "csv":  # an empty CSV export still has its header
            self.file.write_chunk(0, connectors.encode_csv([], self.columns, header=True))
            chunks = 1
        staged = self.file.staged(chunks)
        found = connectors.count_records(
            [self.file.final_path] if staged is None else staged, self.format
        )
        if found != records:
            raise connectors.StagedOutputLost(
                f"cannot publish {self.file.final_path}: its {chunks} chunk(s) hold {found}"
                f" record(s), the step committed {records}"
            )
        self.file.publish(chunks)
        return str(self.file.final_path)


class TableSink:
    """An export to `sandbox.NAME`, staged per run/step and published when the step commits."""

    stages_in_commit = True  # a batch's rows may go in the batch's commit (`defer`)

    def __init__(self, step: Step, env: StepEnv, columns: dict[str, str]):
        self.conn = env.sandbox_connect()
        self.export = connectors.TableExport(
            self.conn,
            step.config["table"],
            env.run_id,
            step.name,
            columns,
            step.config.get("key"),
            step.config.get("mode", "append"),
            step.config.get("deleted"),
        )
        self.table = step.config["table"]

    def start(self, *, fresh: bool, chunks: int = 0, records: int = 0) -> None:
        """Begin an attempt: from scratch (leftovers of an attempt that committed nothing
        go), or after `chunks` committed batches of `records` rows (`StagingLost` if the
        staging table no longer holds them). Rows an attempt published before it died are
        left as they are: `publish` finds them there (no batch is left to stage)."""
        if fresh:
            self.export.discard()
        elif self.export.check_staged(chunks, records):
            return
        self.export.prepare()

    def defer(self, chunk: int, records: list[dict], first_ordinal: int) -> StagedRows | None:
        """Batch `chunk`'s rows to be staged in the batch's commit (the sandbox is the
        state database), or None: this batch goes through `write` (see
        `TableExport.deferred_batch`)."""
        deferred = self.export.deferred_batch(chunk, records, first_ordinal)
        return None if deferred is None else StagedRows(*deferred)

    def write(self, chunk: int, records: list[dict], first_ordinal: int) -> list[RowError]:
        return self.export.write_batch(chunk, records, first_ordinal)

    def discard(self) -> None:
        self.export.discard()

    def publish(self, chunks: int, records: int) -> str:
        """Publish the committed batches: exactly `records` rows, or `StagingLost`."""
        self.export.publish(chunks, records)
        return f"sandbox.{self.table}"

    def close(self) -> None:
        self.conn.close()


def build_source(
    step: Step, env: StepEnv, columns: dict[str, str] | None, limit: int | None = None
):
    """The input of `step` (an ingest's: its first `limit` records only, for a preview)."""
    if step.type == "ingest":
        if step.config.get("source") == "table":
            return TableSource(step, env, columns, limit)
        return FileSource(step, env, columns, limit)
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


def build_sink(step: Step, env: StepEnv, columns: dict[str, str]):
    """The external output of an export step; None for other steps."""
    if step.type != "export":
        return None
    if step.config.get("target") == "table":
        return TableSink(step, env, columns)
    return FileSink(step, env, columns)
