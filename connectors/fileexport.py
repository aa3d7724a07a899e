"""Attempt-safe file output: export files and reject files appear only when the step commits.

A step writes one chunk per batch into a stage directory, each attempt appending its chunks
to a log of its own (`connectors.chunklog`); re-writing a batch after a crash writes its
chunk again, and the last one written is the chunk, never a copy beside it. When the step
commits, `publish(n)` concatenates exactly the committed chunks `0..n-1` into a temporary
file in the stage and renames it into place: a reader sees no file or the whole file.

The stage lives outside the published directory, so nothing but the final files ever
appears in `<run_id>/`, and the stage path tells the step's state: absent (nothing staged
yet), a directory (chunks staged), or an empty file, the *published* marker. The marker
takes the directory's place in the publish, so a stale executor (frozen past its lease,
its step taken over and published meanwhile) that wakes and writes a chunk cannot create
the stage again: its write fails and leaves nothing. Layout (all under one directory, so
no rename crosses file systems):
    export_dir/<run_id>/<rel path>              export_dir/.stage/<run_id>/<step>
    reject_dir/<run_id>/<step>.jsonl            reject_dir/.stage/<run_id>/<step>"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from connectors.chunklog import Chunk, ChunkLog, fsync_dir, latest_chunks
from connectors.errors import ChunkMissing, ExportPathRefused
from dag.columns import INT_OR_NULL, TEXT_OR_NULL, column_values, record_dicts, unbuilt
from dag.paths import relative_path_problem, split_relative_path
from dag.records import RowError

STAGE_DIR_NAME = ".stage"


class ChunkedFile:
    """One output file built from per-batch chunks staged in `stage_dir`; this object's
    chunks go to a log of its own there, created at its first write."""

    def __init__(self, final_path: Path, stage_dir: Path):
        self.final_path = Path(final_path)
        self.stage_dir = Path(stage_dir)
        self._log: ChunkLog | None = None

    def write_chunk(self, seq: int, data: bytes) -> None:
        """Stage `data` as chunk `seq`, durably; writing a seq again replaces it (the last
        one written counts). `FileExistsError` once the file is published (the stage is the
        published marker)."""
        if seq < 0:
            raise ValueError(f"chunk seq must be >= 0, got {seq}")
        self.stage_dir.mkdir(parents=True, exist_ok=True)  # refused by the marker file
        if self._log is not None:
            try:
                self._log.append(seq, data)
                return
            except FileNotFoundError:  # the stage was discarded under this writer
                pass
        # A log of its own: a stale executor writing the same seq never mixes bytes.
        self._log = ChunkLog.create(self.stage_dir)
        self._log.append(seq, data)

    def staged(self, n_chunks: int) -> list[Chunk] | None:
        """The staged chunks `0..n_chunks-1`, or None once the file is published (marker,
        or final file without a stage). `ChunkMissing` if one of them is absent."""
        if n_chunks < 0:
            raise ValueError(f"n_chunks must be >= 0, got {n_chunks}")
        if not self.stage_dir.is_dir():
            if self.final_path.exists():
                return None
            if n_chunks:
                raise ChunkMissing(f"no staged chunks for {self.final_path} ({n_chunks} expected)")
            return []
        found = latest_chunks(self.stage_dir)
        missing = [f"{seq:08d}" for seq in range(n_chunks) if seq not in found]
        if missing:
            raise ChunkMissing(
                f"cannot publish {self.final_path}: chunk(s) {', '.join(missing[:5])} missing"
            )
        return [found[seq] for seq in range(n_chunks)]

    def publish(self, n_chunks: int, staged: list[Chunk] | None = None) -> None:
        """Make the final file the concatenation of chunks `0..n_chunks-1` and leave the
        published marker in place of the stage. `staged`: what `staged(n_chunks)` gave the
        caller just before (its records counted, say), not read from the logs again.

        Chunks numbered `n_chunks` and above (a batch written but never committed) are
        ignored. Idempotent: once published (marker or final file without a stage) this
        does nothing. `ChunkMissing` if a chunk is absent."""
        chunks = staged if staged is not None else self.staged(n_chunks)
        if chunks is None:
            shutil.rmtree(self._tombstone(), ignore_errors=True)
            return
        if not self.stage_dir.is_dir():
            self.stage_dir.unlink(missing_ok=True)  # a marker whose file was removed
            self.stage_dir.mkdir(parents=True, exist_ok=True)
        self.final_path.parent.mkdir(parents=True, exist_ok=True)
        _remove_leftover_tmp(self.final_path)  # of an earlier layout that staged beside it
        _write_atomic(self.final_path, chunks, tmp_dir=self.stage_dir)
        self._retire_stage()

    def _retire_stage(self) -> None:
        """Put the published marker in place of the stage and delete the stage.

        The stage goes in one atomic rename before it is deleted: a crash halfway through a
        recursive delete would leave a stage with holes that a retried publish could only
        refuse, although the final file is complete. A stale executor may re-create the
        directory between the rename and the marker: that copy is retired too."""
        tombstone = self._tombstone()
        marker = self.stage_dir.with_name(f".{self.stage_dir.name}.{uuid.uuid4().hex}.marker")
        marker.touch()
        for _ in range(10):
            shutil.rmtree(tombstone, ignore_errors=True)
            if self.stage_dir.is_dir():
                os.replace(self.stage_dir, tombstone)
            try:
                os.rename(marker, self.stage_dir)  # fails if a directory appeared meanwhile
                break
            except OSError:
                continue
        marker.unlink(missing_ok=True)
        shutil.rmtree(tombstone, ignore_errors=True)
        fsync_dir(self.stage_dir.parent)

    def discard(self) -> bool:
        """Remove the stage (staged chunks, or the published marker); the final file is left
        alone. True if chunks were staged."""
        self._log = None
        found = self.stage_dir.is_dir() or self._tombstone().exists()
        for directory in (self.stage_dir, self._tombstone()):
            shutil.rmtree(directory, ignore_errors=True)
        if self.stage_dir.is_file():
            self.stage_dir.unlink(missing_ok=True)
        try:  # the run's stage folder goes with its last step's stage
            self.stage_dir.parent.rmdir()
        except OSError:
            pass
        return found

    def _tombstone(self) -> Path:
        return self.stage_dir.with_name(f".{self.stage_dir.name}.retired")


def export_file(export_dir: Path, run_id: object, step_name: str, rel_path: str) -> ChunkedFile:
    """The chunked file of an export step: `export_dir/<run_id>/<rel_path>`.

    `ExportPathRefused` for an empty/absolute `rel_path`, a `..` segment, or one that would
    land in the stage directory; also for a step name or run id that is not a plain name."""
    run = _run_dir_name(run_id)
    parts = _rel_parts(rel_path)
    return ChunkedFile(Path(export_dir, run, *parts), _stage_dir(Path(export_dir), run, step_name))


def reject_file(reject_dir: Path, run_id: object, step_name: str) -> ChunkedFile:
    """The chunked reject file of a step: `reject_dir/<run_id>/<step_name>.jsonl`."""
    run = _run_dir_name(run_id)
    stage_dir = _stage_dir(Path(reject_dir), run, step_name)
    return ChunkedFile(Path(reject_dir, run, f"{step_name}.jsonl"), stage_dir)


def count_records(sources: Iterable[Path | Chunk], fmt: str) -> int:
    """The records in the concatenation of `sources` (files, or staged chunks: each holds
    whole records) as written by `encode_jsonl` (one per line) or `encode_csv` (CSV records
    after the header; a quoted field may span lines)."""
    if fmt != "csv":
        n = 0
        for source in sources:
            if isinstance(source, Chunk):
                n += sum(block.count(b"\n") for block in source.blocks())
                continue
            with open(source, "rb") as f:
                while block := f.read(1024 * 1024):
                    n += block.count(b"\n")
        return n
    rows = 0
    for source in sources:
        if isinstance(source, Chunk):
            text = io.StringIO(source.read().decode("utf-8"), newline="")
            rows += sum(1 for _ in csv.reader(text))
            continue
        with open(source, encoding="utf-8", newline="") as f:
            rows += sum(1 for _ in csv.reader(f))
    return max(rows - 1, 0)


def encode_jsonl(records: Iterable[Mapping[str, Any]]) -> bytes:
    """One JSON object per line (UTF-8, not ASCII-escaped), keys in record order: by
    orjson, which writes the standard encoder's bytes several times faster, or by the
    standard encoder for a batch orjson refuses (a lone surrogate, an int beyond 64 bits)."""
    # Of a Columns, dicts built for orjson and dropped (the batch stays by column): faster
    # than an orjson call per value joined by column (docs/decisions.md, "Typed batches
    # kept by column to the exports").
    records = record_dicts(records)
    try:
        # The batch in one call: `[{..},{..}]`, each record boundary a `},{`, made a line end.
        # Where `},{` also occurs inside a value (a text, a list of objects), the split is not
        # exact and the lines are written a record at a time.
        whole = orjson.dumps(records)
        if whole.count(b"},{") == len(records) - 1:
            lines = whole.replace(b"},{", b"}\n{")
            del whole  # at most two copies of the batch's text at once: a 50 MiB field
            return b"".join([memoryview(lines)[1:-1], b"\n"])
        return b"".join([orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in records])
    except orjson.JSONEncodeError:
        return "".join(_encode_json(r) + "\n" for r in records).encode("utf-8")


# One encoder for every record: json.dumps with options builds a new one per call.
_encode_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def encode_csv(
    records: Iterable[Mapping[str, Any]], columns: Iterable[str], *, header: bool
) -> bytes:
    """CSV lines of `columns` (a header line first when `header`: only in chunk 0).

    Null (and a missing column) is an empty unquoted field and the empty string a quoted
    `""`, the same distinction ingest makes, so an exported file reads back as written."""
    names = list(columns)
    lines = [",".join(_csv_field(n) for n in names)] if header else []
    if unbuilt(records) is not None:
        fields = [_csv_column(values) for values in column_values(records, names)]
        lines += map(",".join, zip(*fields, strict=True)) if names else [""] * len(records)
    else:
        for r in records:
            lines.append(",".join(_csv_field(r.get(n)) for n in names))
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _csv_column(values: list[Any]) -> list[str]:
    """The `_csv_field`s of one column: an int column and a text column without an empty
    string or a character to quote by C-level maps and checks over the whole column."""
    kinds = set(map(type, values))
    nulls = type(None) in kinds
    if kinds <= INT_OR_NULL:
        return ["" if v is None else str(v) for v in values] if nulls else list(map(str, values))
    if kinds <= TEXT_OR_NULL:
        texts = [v for v in values if v is not None] if nulls else values
        joined = "\x00".join(texts)
        if "" not in texts and not any(c in joined for c in _CSV_SPECIAL):
            return ["" if v is None else v for v in values] if nulls else list(values)
    return list(map(_csv_field, values))


def _csv_field(value: Any) -> str:
    if value is None:
        return ""
    text = str(value)
    if text == "" or any(c in text for c in _CSV_SPECIAL):
        return '"' + text.replace('"', '""') + '"'
    return text


_CSV_SPECIAL = frozenset(',"\r\n')


def encode_rejects(row_errors: Iterable[RowError]) -> bytes:
    """The reject-file lines of `row_errors`: `RowError.as_dict()` as JSON, one per line."""
    # `raw` is whatever the reader saw; `default=str` keeps an odd value from failing a step.
    return "".join(
        json.dumps(e.as_dict(), ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        for e in row_errors
    ).encode("utf-8")


def _run_dir_name(run_id: object) -> str:
    try:
        return str(uuid.UUID(str(run_id)))
    except ValueError:
        raise ExportPathRefused(f"run id {run_id!r} is not a UUID") from None


def _stage_dir(base_dir: Path, run: str, step_name: str) -> Path:
    if (
        not isinstance(step_name, str)
        or step_name in ("", ".", "..")
        or any(c in step_name for c in "/\\\x00")
    ):
        raise ExportPathRefused(f"step name {step_name!r} cannot name a file")
    return base_dir / STAGE_DIR_NAME / run / step_name


def _rel_parts(rel_path: str) -> tuple[str, ...]:
    if not isinstance(rel_path, str):
        raise ExportPathRefused(f"export path {rel_path!r} is not a string")
    if (problem := relative_path_problem(rel_path)) is not None:
        raise ExportPathRefused(f"export path {rel_path!r} {problem}")
    posix = "/".join(split_relative_path(rel_path))
    parts = PurePosixPath(posix).parts
    if parts[0] == STAGE_DIR_NAME:
        raise ExportPathRefused(f"export path {rel_path!r} is reserved for staging")
    return parts


def _write_atomic(path: Path, chunks: list[Chunk], *, tmp_dir: Path) -> None:
    """Write the concatenation of `chunks` to `path` via a unique temporary file in `tmp_dir`
    (the same file system): fsync, rename over `path`, fsync the directory."""
    tmp = tmp_dir / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "xb") as out:
            for chunk in chunks:
                chunk.copy_to(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _remove_leftover_tmp(final_path: Path) -> None:
    """Remove temporary files of an earlier publish of `final_path` cut short by a crash."""
    prefix = f".{final_path.name}."
    for entry in os.scandir(final_path.parent):
        if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
            Path(entry.path).unlink(missing_ok=True)
