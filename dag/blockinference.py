"""Inference over the rest of a CSV file a block at a time (`infer_blocks`): a block of
whole lines without a quote, a carriage return, a NUL or an empty line, in valid UTF-8 and
every line of the header's width, is parsed and checked by pyarrow (in C++, about a MiB a
call); any other block, and any block in which a value would rule a type out, is read by
the batch reader and taken by `ColumnInference.observe`. So the types and their evidence
(the count of values, the first value that ruled a type out, by line) are exactly those of
the batch pass: a block is only ever counted by pyarrow when it changes nothing but the
counts (`docs/decisions.md`, "Inference over blocks of a file").

Such a block's lines are records as the batch reader reads them: each line split at the
delimiter (`str.split`, what `csv.reader` gives for a line without quotes), an empty value
null, a value equal to one of the ingest's `null_values` null."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import BinaryIO

from dag.csvblocks import BLOCK_BYTES, all_dates, int_values, parse_block, read_block
from dag.inference import ColumnInference
from dag.records import Position, RawBatch


def infer_blocks(
    stream: BinaryIO,
    inference: ColumnInference,
    start: Position,
    *,
    delimiter: str,
    nulls: Collection[str],
    batches: Callable[[Position], Iterator[RawBatch]],
    block_bytes: int = BLOCK_BYTES,
) -> None:
    """Take the records of `stream` from `start` (a record's start, after the header) to
    its end into `inference`, stopping once it is settled. `batches(position)` reads raw
    batches from a position, null markers made null (the batch pass's reader); a block is
    `block_bytes` and the rest of its last line (`dag.csvblocks.read_block`)."""
    position = start
    while not inference.settled:
        block = read_block(stream, position.offset, block_bytes)
        if block == b"":
            return
        counts = None if block is None else _clean_counts(block, inference, delimiter, nulls)
        if counts is not None:
            inference.take_counts(counts)
            position = Position(position.offset + len(block), position.line + block.count(b"\n"))
            continue
        end = position.offset + (1 if block is None else len(block))  # a long line: a batch
        for raw in batches(position):
            inference.observe(raw.records)
            position = raw.end
            if position.offset >= end or inference.settled:
                break
        else:
            return  # the reader reached the end of the file


def _clean_counts(
    block: bytes, inference: ColumnInference, delimiter: str, nulls: Collection[str]
) -> dict[str, int] | None:
    """The count of present values of each column in doubt in `block`, or None when the
    block is the batch reader's (`dag.csvblocks.parse_block`), or a value of it would rule
    a type out (the batch reader then takes it, and finds that value's line)."""
    doubts = inference.open_doubts()
    table = parse_block(block, inference.header, delimiter, nulls, list(doubts))
    if table is None:
        return None
    counts = {}
    for name, (may_be_int, may_be_date) in doubts.items():
        column = table.column(name)
        present = len(column) - column.null_count
        if present and (
            (may_be_int and int_values(column) is None) or (may_be_date and not all_dates(column))
        ):
            return None
        counts[name] = present
    return counts
