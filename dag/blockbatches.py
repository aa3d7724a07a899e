"""Typed batches straight from a quote-free block of a CSV file (`block_batches`): the
block's lines parsed by pyarrow (`dag.csvblocks`), each column typed there as a whole (int
text checked canonical and in range, dates checked real) and made Python lists once, then
cut into batches of `batch_size` records. The batches are the batch reader's and
`dag.types.type_records`' (the same records, values, positions and raw bytes; property
tests hold them to it), with no row error: a block in which a line has another width or a
value does not fit its column's type is the batch reader's, which reports it
(`docs/decisions.md`, "Typed batches from blocks of a file")."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import BinaryIO

from dag.columns import Columns
from dag.csvblocks import (
    BLOCK_BYTES,
    MAX_BLOCK_BYTES,
    all_dates,
    int_values,
    parse_block,
    read_block,
)
from dag.records import Position


@dataclass
class BlockBatch:
    """A typed batch of a block: its records, the line of the first one, where the next
    record starts and the batch's bytes in the file."""

    typed: Columns
    first_line: int
    end: Position
    data: bytes


@dataclass
class Block:
    """What a block gave: its batches, or None when the batch reader must read from its
    start (up to `end`, the offset after the block); `at_end` when it reaches the end of
    the file."""

    batches: list[BlockBatch] | None
    end: int
    at_end: bool


def block_batches(
    stream: BinaryIO,
    start: Position,
    header: Sequence[str],
    columns: Mapping[str, str],
    *,
    delimiter: str,
    nulls: Collection[str],
    batch_size: int,
    block_bytes: int = BLOCK_BYTES,
) -> Block:
    """The typed batches of the block of `stream` at `start` (a record's start, after the
    header): every full batch of it, and at the end of the file the last, shorter one too.
    The lines after its last full batch start the next block. A block holds at least a
    batch's lines where that fits in `MAX_BLOCK_BYTES`."""
    block = read_block(stream, start.offset, block_bytes)
    if block is not None and len(block) >= block_bytes:
        found = block.count(b"\n")
        wanted = block_bytes * (batch_size // max(found, 1) + 1)  # lines for one batch
        if found < batch_size and wanted <= MAX_BLOCK_BYTES:
            block_bytes = wanted
            block = read_block(stream, start.offset, block_bytes)
    if block is None:  # a long line: the batch reader reads on from here, a batch at least
        return Block(None, start.offset + 1, False)
    at_end = len(block) < block_bytes or not stream.read(1)
    lines = block.split(b"\n")
    ends_line = lines[-1] == b""
    if ends_line:
        lines.pop()
    kept = len(lines) if at_end else len(lines) - len(lines) % batch_size
    missed = Block(None, start.offset + len(block), at_end)
    if not kept or not set(columns) <= set(header):
        return missed
    ends = list(accumulate(map((1).__add__, map(len, lines[:kept]))))  # after each line end
    if kept == len(lines) and not ends_line:
        ends[-1] -= 1  # the file's last line has no line end
    block = block[: ends[-1]]
    values = _typed_columns(block, header, columns, delimiter, nulls)
    if values is None:
        return Block(None, start.offset + len(block), at_end)
    batches = []
    for first in range(0, kept, batch_size):
        last = min(first + batch_size, kept)
        begin = ends[first - 1] if first else 0
        line_after = start.line + last - (last == len(lines) and not ends_line)
        batches.append(
            BlockBatch(
                Columns(list(columns), [column[first:last] for column in values]),
                start.line + first,
                Position(start.offset + ends[last - 1], line_after),
                block[begin : ends[last - 1]],
            )
        )
    return Block(batches, start.offset + len(block), at_end)  # at the end: every line kept


def _typed_columns(
    block: bytes,
    header: Sequence[str],
    columns: Mapping[str, str],
    delimiter: str,
    nulls: Collection[str],
) -> list[list] | None:
    """Each of `columns`' values in the block, typed, or None (the batch reader's block)."""
    table = parse_block(block, header, delimiter, nulls, list(columns))
    if table is None:
        return None
    typed = []
    for name, column_type in columns.items():
        column = table.column(name)
        if column_type == "int":
            column = int_values(column)
            if column is None:
                return None
        elif column_type == "date" and not all_dates(column):
            return None
        typed.append(column.to_pylist())
    return typed
