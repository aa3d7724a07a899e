"""Quote-free blocks of a CSV file, read by pyarrow in C++ as the batch reader reads them.

A block is whole lines of a file from a record's start (`read_block`). `parse_block` reads
one that the batch reader (`dag.csvparts`) would read as one record a line, split at the
delimiter (what `csv.reader` gives for a line without quotes), and nothing else: no quote,
carriage return, NUL or empty line, valid UTF-8, every line of the header's width. Its
values are text; an empty value and a value equal to one of the ingest's `null_values` are
null, as `dag.types.null_out` makes them. Any other block is None: the batch reader's.

`int_values` and `all_dates` check a column's present values by the rules of `dag.types`
(canonical int64 text, real `YYYY-MM-DD` dates) without a Python step per value.

pyarrow is imported by the first block read: its libraries map about 42 MiB, which an
executor that never reads such a block does not need."""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    import pyarrow as pa

BLOCK_BYTES = 1 << 20
# A block whose last line makes it longer, or that would need more to hold one batch's
# lines, is left to the batch reader: it holds a long record a field at a time
# (`dag.csvlong`) and a wide batch at no more than its own size (a block of 1,000-column
# lines took 100 MiB more at its peak).
MAX_BLOCK_BYTES = 2 * BLOCK_BYTES
_REFUSED = (b'"', b"\r", b"\x00", b"\n\n")
_DATE_SHAPE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


def read_block(stream: BinaryIO, offset: int, block_bytes: int = BLOCK_BYTES) -> bytes | None:
    """`block_bytes` of `stream` from `offset` and the rest of the last line: whole lines,
    the last one without a line end only at the end of the file (b"" there). None when that
    line goes on past `MAX_BLOCK_BYTES` (a long record: the batch reader's), read no
    further."""
    stream.seek(offset)
    block = stream.read(block_bytes)
    if len(block) == block_bytes:
        rest = stream.readline(MAX_BLOCK_BYTES)
        if len(rest) == MAX_BLOCK_BYTES and not rest.endswith(b"\n"):
            return None
        block += rest
    return block


def parse_block(
    block: bytes, header: Sequence[str], delimiter: str, nulls: Collection[str], include: list[str]
) -> pa.Table | None:
    """Columns `include` of the records of `block` as text (see the module docstring), or
    None when the batch reader must read it."""
    if (
        not block
        or len(block) > MAX_BLOCK_BYTES
        or block[:1] == b"\n"
        or any(part in block for part in _REFUSED)
    ):
        return None
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            return None  # the batch reader's row errors
    pa, pacsv = _pyarrow()
    try:
        return pacsv.read_csv(
            pa.py_buffer(block),
            read_options=pacsv.ReadOptions(
                column_names=list(header), use_threads=False, block_size=len(block) + 1
            ),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, quote_char=False, escape_char=False, ignore_empty_lines=False
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in header},
                include_columns=include,
                strings_can_be_null=True,
                null_values=["", *nulls],
            ),
        )
    except pa.ArrowInvalid:  # a line of another width, say: the batch reader's row error
        return None


def int_values(column: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """The column as int64 when every present value is canonical int64 text (what str()
    gives back for its int: no `+`, leading zero, `-0` or space), else None."""
    pa, _ = _pyarrow()
    import pyarrow.compute as pc

    try:
        ints = pc.cast(column, pa.int64())
    except pa.ArrowInvalid:  # not digits, or beyond int64
        return None
    return ints if _all_true(pc.equal(pc.cast(ints, pa.string()), column)) else None


def all_dates(column: pa.ChunkedArray) -> bool:
    """Every present value a calendar date `YYYY-MM-DD` as `datetime.date` reads one: of
    the date's shape, read by pyarrow and written back the same, and not of the year 0000
    (which pyarrow reads and `datetime.date` does not)."""
    pa, _ = _pyarrow()
    import pyarrow.compute as pc

    if not _all_true(pc.match_substring_regex(column, _DATE_SHAPE)):
        return False
    if not _all_true(pc.invert(pc.starts_with(column, "0000"))):
        return False
    try:
        written = pc.cast(pc.cast(column, pa.date32()), pa.string())
    except pa.ArrowInvalid:
        return False
    return _all_true(pc.equal(written, column))


def _all_true(flags: Any) -> bool:
    """True when no present flag is false (nulls, the column's nulls, are skipped)."""
    import pyarrow.compute as pc

    return pc.all(flags).as_py() is not False


@functools.cache
def _pyarrow() -> tuple[Any, Any]:
    """pyarrow and its CSV reader, imported once. Its arrays are allocated by the C library's
    `malloc` (`system_memory_pool`), which gives a block's memory back as the next block
    reuses it: its default pool (mimalloc) kept about 23 MiB more private memory over
    `flights.csv`."""
    import pyarrow
    import pyarrow.compute  # loaded with the rest; `int_values` and `all_dates` name it
    import pyarrow.csv

    pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    return pyarrow, pyarrow.csv
