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
from typing import TYPE_CHECKING, Any, BinaryIO

from dag.inference import ColumnInference
from dag.records import Position, RawBatch

if TYPE_CHECKING:
    import pyarrow as pa

BLOCK_BYTES = 1 << 20
# One value a line, anchored (RE2): the int and date shapes of `dag.inference`.
_INT_SHAPE = r"^-?(?:0|[1-9][0-9]{0,17})$"
_DATE_SHAPE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_REFUSED = (b'"', b"\r", b"\x00", b"\n\n")


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
    `block_bytes` and the rest of its last line."""
    position = start
    while not inference.settled:
        stream.seek(position.offset)
        block = stream.read(block_bytes)
        if not block:
            return
        if len(block) == block_bytes:
            block += stream.readline()  # to the end of its line
        counts = _clean_counts(block, inference, delimiter, nulls)
        if counts is not None:
            inference.take_counts(counts)
            position = Position(position.offset + len(block), position.line + block.count(b"\n"))
            continue
        end = position.offset + len(block)
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
    block is not one pyarrow reads as the batch reader does, or a value of it would rule a
    type out (the batch reader then takes it, and finds that value's line)."""
    if block[:1] == b"\n" or any(part in block for part in _REFUSED):
        return None
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            return None  # the batch reader's row errors
    pa, pacsv = _pyarrow()
    doubts = inference.open_doubts()
    try:
        table = pacsv.read_csv(
            pa.py_buffer(block),
            read_options=pacsv.ReadOptions(
                column_names=inference.header, use_threads=False, block_size=len(block) + 1
            ),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, quote_char=False, escape_char=False, ignore_empty_lines=False
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in inference.header},
                include_columns=list(doubts),
                strings_can_be_null=True,
                null_values=["", *nulls],
            ),
        )
    except pa.ArrowInvalid:  # a line of another width, say: the batch reader's row error
        return None
    counts = {}
    for name, (may_be_int, may_be_date) in doubts.items():
        column = table.column(name)
        present = len(column) - column.null_count
        if present and (
            (may_be_int and not _all_match(column, _INT_SHAPE))
            or (may_be_date and not _all_dates(column))
        ):
            return None
        counts[name] = present
    return counts


def _pyarrow() -> tuple[Any, Any]:
    """pyarrow and its CSV reader, imported by the first inference that reads blocks: its
    libraries map about 70 MiB, which an executor that never infers does not need."""
    import pyarrow
    import pyarrow.csv

    return pyarrow, pyarrow.csv


def _all_match(column: pa.ChunkedArray, pattern: str) -> bool:
    import pyarrow.compute as pc

    return pc.all(pc.match_substring_regex(column, pattern)).as_py() is not False


def _all_dates(column: pa.ChunkedArray) -> bool:
    """Every present value a calendar date `YYYY-MM-DD` as `datetime.date` reads one: of
    the date's shape, read by pyarrow and written back the same, and not of the year 0000
    (which pyarrow reads and `datetime.date` does not)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not _all_match(column, _DATE_SHAPE) or pc.any(pc.starts_with(column, "0000")).as_py():
        return False
    try:
        written = pc.cast(pc.cast(column, pa.date32()), pa.string())
    except pa.ArrowInvalid:
        return False
    return pc.all(pc.equal(written, column)).as_py() is not False
