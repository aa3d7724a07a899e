"""The `file` ingest source (`dag.sources.file`): a file, or every file a glob matches, in the
data directory behind the path guard (`connectors`), typed as declared or inferred."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import connectors
from actors.datasets import Places, file_dataset
from actors.schemadrift import meet_schema
from actors.sources.source import Config, SourceImpl
from actors.stepio import InputBatch, StepEnv
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
    block_batches,
    infer_blocks,
    null_out,
    propose_dialect,
    read_csv_batches,
    read_json_batches,
    read_jsonl_batches,
    type_records,
)
from dag.csvblocks import BLOCK_BYTES
from dag.csvexact import parse_header
from dag.sniffing import HEAD_BYTES as SNIFF_BYTES
from dag.sources.file import INGEST_FORMATS


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
        self.block_bytes = BLOCK_BYTES  # of `dag.block_batches`

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
                    if self._by_blocks():  # the rest a block at a time: `dag.infer_blocks`
                        infer_blocks(
                            stream,
                            inference,
                            raw.end,
                            delimiter=self.config.get("delimiter", ","),
                            nulls=self.nulls,
                            batches=partial(self._raw_batches, stream),
                        )
                        break
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
            if self._by_blocks() and self.limit is None:
                yield from self._block_batches(stream, rel_path, index, start, ordinal)
            else:
                yield from self._read_batches(stream, rel_path, index, start, ordinal)

    def _by_blocks(self) -> bool:
        """A CSV file with the `"` quote: its quote-free blocks are read by pyarrow
        (`dag.csvblocks`), for inference and for its batches; the rest by the batch reader."""
        cfg = self.config
        return cfg.get("format", "csv") == "csv" and cfg.get("quote", '"') == '"'

    def _block_batches(
        self, stream: BinaryIO, rel_path: str, index: int, start: Position, ordinal: int
    ) -> Iterator[InputBatch]:
        """A CSV file's batches a block at a time (`dag.block_batches`), a block that only
        the batch reader can read by that reader (`_read_batches`, up to the block's end);
        after two such blocks in a row, the rest of the file by the batch reader."""
        assert self.columns is not None
        delimiter = self.config.get("delimiter", ",")
        header, after_header = parse_header(stream, delimiter, '"')
        position = start if start.offset > after_header.offset else after_header
        offset = start.offset  # where the next batch's bytes begin
        file = None if rel_path == self.config["path"] else rel_path  # a glob's
        misses, yielded = 0, False
        while True:
            block = block_batches(stream, position, header, self.columns, delimiter=delimiter,
                                  nulls=self.nulls, batch_size=BATCH_SIZE,
                                  block_bytes=self.block_bytes)  # fmt: skip
            if block.batches is not None:
                misses, yielded = 0, True
                for b in block.batches:
                    lines = range(b.first_line, b.first_line + len(b.typed))
                    # the input digest's bytes: from the last batch's end (the header too)
                    data = b.data
                    if b.end.offset - len(data) != offset:
                        data = os.pread(stream.fileno(), b.end.offset - offset, offset)
                    yield InputBatch(b.typed, [], len(b.typed), _resume_at(b.end, index),
                                     raw_bytes=data, lines=lines, file=file)  # fmt: skip
                    ordinal += len(b.typed)
                    position = b.end
                    offset = b.end.offset
                if block.at_end:
                    return
                continue
            if yielded and block.at_end and block.end == position.offset:
                return  # nothing after the last batch (the batch reader would give an empty one)
            misses += 1
            stop = block.end if misses < 2 else None
            last = None
            read_from = Position(offset, position.line) if not yielded else position
            for last in self._read_batches(stream, rel_path, index, read_from, ordinal, stop):
                if yielded and not last.records_in:
                    continue  # empty lines after the last batch: the batch reader gives none
                yielded = True
                ordinal += last.records_in
                yield last
            if last is None or last.records_in < BATCH_SIZE or stop is None:
                return  # the end of the file
            position = Position.from_dict(last.position["position"])
            offset = position.offset

    def _read_batches(
        self,
        stream: BinaryIO,
        rel_path: str,
        index: int,
        start: Position,
        ordinal: int,
        stop: int | None = None,
    ) -> Iterator[InputBatch]:
        """The file's batches by the batch reader, typed by `type_records`, from `start`
        up to the first batch that ends at `stop` or after it (without `stop`, the end)."""
        assert self.columns is not None
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
            lines = _typed_lines(raw.records, type_errors, ordinal - raw.size)
            file = None if rel_path == self.config["path"] else rel_path  # a glob's
            yield InputBatch(typed, errors, raw.size, _resume_at(raw.end, index),
                             raw_bytes=raw_bytes, lines=lines, file=file)  # fmt: skip
            if stop is not None and raw.end.offset >= stop:
                return


def _resume_at(end: Position, index: int) -> dict[str, Any]:
    """A batch's position: where the next record starts (and, past the first file of a
    glob, the file's index)."""
    position: dict[str, Any] = {"position": end.as_dict()}
    if index:
        position["file"] = index
    return position


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


def _view(config: Config) -> dict[str, Any]:
    return {"source": "file", "path": config["path"], "format": config.get("format", "csv")}


def _where(view: Mapping[str, Any]) -> str:
    return f" · {view['path']}"


def _dataset(places: Places, config: Config) -> tuple[str, str]:
    return file_dataset(places.data_dir / config["path"])


def _dialect(step: Step, env: StepEnv) -> dict[str, Any] | None:
    """The encoding and delimiter a file ingest's first file looks written in, when they
    differ from the declared ones (`dag.propose_dialect`, from its first bytes)."""
    try:
        first = connectors.expand_source(env.data_dir, step.config["path"])[0]
        with connectors.open_source(env.data_dir, first) as stream:
            head = stream.read(SNIFF_BYTES)
    except (connectors.ConnectorError, OSError):
        return None  # the step's own run says why
    return propose_dialect(head, step.config)


def _progress(config: Config, checkpoint: Mapping[str, Any], data_dir: Path) -> float | None:
    """The checkpoint's byte offset over the file's size."""
    offset = (checkpoint.get("position") or checkpoint).get("offset", 0)
    try:
        size = (data_dir / connectors.check_rel_path(str(config.get("path")))).stat().st_size
    except (OSError, ValueError, connectors.ConnectorError):
        return None
    return min(offset / size, 1.0) if size else None


FILE = SourceImpl(
    "file",
    FileSource,
    _view,
    {
        "source": {"type": "string", "enum": ["file"]},
        "path": {"type": "string"},
        "format": {"type": "string", "enum": list(INGEST_FORMATS)},
    },
    _where,
    _dataset,
    dialect=_dialect,
    progress=_progress,
    infers=True,
)
SOURCES = (FILE,)
