"""Chunk logs: the chunks of a file stage (`connectors.fileexport`), appended to one file per
writer instead of one file per chunk.

A writer (one attempt of a step) creates its log once, `<number:08d>.<uuid>.chunks` in the
stage, `number` one more than the highest in the stage, and appends each chunk as a record:
a header (magic, seq, length, CRC-32 of the data) and the data, flushed to disk
(`fdatasync`) before the batch's checkpoint can point at it. Creating a file costs a
journalled directory change and two flushes where appending costs one (and on a network
file system a round trip to the server), so a step of many batches pays for one creation.

Reading a stage (`latest_chunks`) takes every log in order of number and every record in
order of writing: the last record of a seq is its chunk (the last written wins, as a rename
over a chunk's own file would). A record cut short or damaged (a writer killed while
appending, a power cut after an unflushed append) ends its log: what follows it was never
flushed either, since a writer appends after its own last record only."""

from __future__ import annotations

import os
import re
import struct
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

LOG_SUFFIX = ".chunks"
_HEADER = struct.Struct("<4sQQI")  # magic, seq, length, CRC-32 of the data
_MAGIC = b"ETLc"
_LOG_NAME = re.compile(r"^(\d{8})\.[0-9a-f]{32}" + re.escape(LOG_SUFFIX) + "$")
_COPY_BLOCK = 1024 * 1024


class Chunk(NamedTuple):
    """Chunk `seq`: `length` bytes at `offset` of the log (or other file) at `path`."""

    seq: int
    path: Path
    offset: int
    length: int

    def read(self) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(self.length)
        if len(data) != self.length:
            raise OSError(f"{self.path} ends inside chunk {self.seq:08d}")
        return data

    def blocks(self) -> Iterator[bytes]:
        """The chunk's bytes a block (at most 1 MiB) at a time."""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            left = self.length
            while left:
                block = f.read(min(left, _COPY_BLOCK))
                if not block:
                    raise OSError(f"{self.path} ends inside chunk {self.seq:08d}")
                yield block
                left -= len(block)

    def copy_to(self, out: BinaryIO) -> None:
        """Write the chunk's bytes to `out`, a block at a time."""
        for block in self.blocks():
            out.write(block)


class ChunkLog:
    """One writer's log of chunks in a stage directory (see the module)."""

    def __init__(self, path: Path):
        self.path = path
        self._end = 0  # where the next record goes: after the last one appended whole

    @classmethod
    def create(cls, stage_dir: Path) -> ChunkLog:
        """A new, empty log in `stage_dir`, after every log there; its name is durable."""
        number = 1 + max((n for n, _ in _logs(stage_dir)), default=0)
        path = stage_dir / f"{number:08d}.{uuid.uuid4().hex}{LOG_SUFFIX}"
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        fsync_dir(stage_dir)
        return cls(path)

    def append(self, seq: int, data: bytes) -> None:
        """Append chunk `seq` and flush it to disk. `FileNotFoundError` if the log is gone
        (its stage discarded); a failed append is overwritten by the next one."""
        header = _HEADER.pack(_MAGIC, seq, len(data), zlib.crc32(data))
        fd = os.open(self.path, os.O_WRONLY)
        try:
            _write_all(fd, [header, data], self._end)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        self._end += len(header) + len(data)


def latest_chunks(stage_dir: Path) -> dict[int, Chunk]:
    """seq -> its chunk, the last one written of every seq in the logs of `stage_dir`."""
    found: dict[int, Chunk] = {}
    for _, path in sorted(_logs(stage_dir)):
        for chunk in _records(path):
            found[chunk.seq] = chunk
    return found


def fsync_dir(directory: Path) -> None:
    # A new or renamed entry is durable only once its directory is on disk: the checkpoint
    # that follows must never point at a chunk a power cut could take back.
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _logs(stage_dir: Path) -> Iterator[tuple[int, Path]]:
    """(number, path) of every log in `stage_dir`."""
    for entry in os.scandir(stage_dir):
        if (m := _LOG_NAME.match(entry.name)) is not None:
            yield int(m.group(1)), Path(entry.path)


def _records(path: Path) -> Iterator[Chunk]:
    """The whole records of the log at `path`, up to the first one cut short or damaged."""
    with open(path, "rb") as f:
        offset = 0
        while len(header := f.read(_HEADER.size)) == _HEADER.size:
            magic, seq, length, crc = _HEADER.unpack(header)
            if magic != _MAGIC:
                return
            data = f.read(length)
            if len(data) != length or zlib.crc32(data) != crc:
                return
            yield Chunk(seq, path, offset + _HEADER.size, length)
            offset += _HEADER.size + length


def _write_all(fd: int, parts: list[bytes], offset: int) -> None:
    """Write `parts` one after the other at `offset`, however many writes it takes."""
    views = [memoryview(p) for p in parts if len(p)]
    while views:
        written = os.pwritev(fd, views, offset)
        offset += written
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views:
            views[0] = views[0][written:]
