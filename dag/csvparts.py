"""CSV partitioning: logical records from a binary stream, in resumable batches.

Contract of `read_csv_batches`:

- The stream is a seekable, buffered binary file. Lines end with LF or CRLF (a lone CR is
  not a line terminator; outside quotes it makes the record malformed). The first non-empty
  record is the header; a UTF-8 BOM before it is skipped. An empty or duplicate column
  name, a malformed header or a file without a header raise `CsvFormatError`.
- A quoted field may hold the delimiter, doubled quotes, LF and CRLF; such a record is one
  logical record whatever number of physical lines it spans. Every record carries the
  physical (1-based) line number of its first line.
- Empty lines between records are skipped: they are not records and count towards nothing.
  (So in a one-column file an empty value must be written `""`.)
- Values: an empty unquoted field is `None` (null); a quoted empty field `""` is the empty
  string `""` (`dag.types` keeps it for string columns and reads it as null for int/date).
- A batch holds at most `batch_size` input records, good and malformed together, and ends
  with `end`: the byte offset and line number where the next record starts. Passing that
  `end` back as `start` re-reads the header from offset 0 and yields exactly the records
  after it, so batch boundaries only ever fall between records. A `start` at or before the
  end of the header means "from the first record". At least one batch (possibly empty) is
  always yielded, so the caller always learns the header.
- Malformed records never raise; each becomes a `RowError` in `batch.row_errors` (line of
  the record's start, column `None`, `raw` = the record text without its final line
  terminator): wrong number of fields; invalid UTF-8 (`raw` decoded with
  `errors="replace"`); a carriage return outside quotes that is not part of a CRLF (also at
  the end of the file, before a CRLF, or on a line of nothing but CRs: such a line is not an
  empty line); a quote that is not followed by a delimiter or the end of the line
  (`"ab"c`); and a quote left open at the end of the file.
- Reading goes on after the malformed record. A malformed record that holds an odd number
  of quotes or spans several lines (a stray quote may have opened a field) ends, and
  reading resumes, by the quote-parity rule of `dag.csvresync`: a stray quote that no later
  quote closes costs its own line, and the tail of a broken quoted field is rejected with
  it, never imported as an invented record (`"p"q,"r` + newline + `s",t` is one bad record,
  not a bad one and `{a: 's"', b: 't'}`).
- `quote` (default `"`) is the quote character; with another one every batch is read by
  the exact reader.
- A field longer than `FIELD_LIMIT_BYTES` (longer than an ingest file may be) raises
  `CsvFormatError`: the reader would otherwise resume inside that quoted field.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from itertools import pairwise
from typing import BinaryIO

from dag.csvexact import FIELD_LIMIT_BYTES, ExactReader, parse_header
from dag.csvlong import LONG_FIELDS, LONG_LINE_BYTES, PlainSeen, plain_lines, some_lines
from dag.limits import BATCH_SIZE
from dag.records import ColumnRecords, Position, RawBatch, RawRecord

__all__ = ["read_csv_batches"]


def read_csv_batches(
    stream: BinaryIO,
    *,
    delimiter: str = ",",
    quote: str = '"',
    batch_size: int = BATCH_SIZE,
    start: Position | None = None,
) -> Iterator[RawBatch]:
    """Yield batches of at most `batch_size` records (see the module docstring).

    Each batch is first read by `_bare_batch`, for the commonest batch of all (one record
    per line, no quote spanning lines): whole lines at a time, its records a column at a time
    (`ColumnRecords`). A batch it cannot vouch for goes to `_plain_batch`, which does no
    per-line Python work, and a batch that one cannot vouch for is read again by the exact
    reader (`dag.csvexact`), which follows every rule of the contract line by line. All three end a
    batch at the same record, so where batches end never depends on which reader read them.
    After two misses of a reader in a row, the rest of the file skips it (a file full of rare
    cases pays for each quicker try twice, not always). With another `quote` than `"`,
    every batch is read by the exact reader."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if len(delimiter) != 1 or delimiter in f"{quote}\r\n":
        raise ValueError(f"unusable CSV delimiter {delimiter!r}")
    if len(quote) != 1 or not quote.isascii() or quote in "\r\n":
        raise ValueError(f"unusable CSV quote {quote!r}")
    if csv.field_size_limit() < FIELD_LIMIT_BYTES:
        csv.field_size_limit(FIELD_LIMIT_BYTES)
    header, after_header = parse_header(stream, delimiter, quote)
    position = after_header if start is None or start.offset <= after_header.offset else start
    fast = 0 if quote == '"' else 2  # the quicker readers know only `"`
    yielded, bare_misses, misses = False, fast, fast
    exact = ExactReader(stream, header, (delimiter, quote))
    while True:
        batch = None
        if bare_misses < 2:
            batch = _bare_batch(stream, header, delimiter, batch_size, position)
            bare_misses = 0 if batch is not None else bare_misses + 1
        if batch is None and misses < 2:
            batch = _plain_batch(stream, header, delimiter, batch_size, position)
            misses = 0 if batch is not None else misses + 1
        if batch is None:
            batch = exact.batch(batch_size, position)
        if batch.size or not yielded:
            yield batch
            yielded = True
        if batch.size < batch_size:
            return
        position = batch.end


def _bare_batch(
    stream: BinaryIO, header: list[str], delimiter: str, batch_size: int, begin: Position
) -> RawBatch | None:
    """The commonest batch: `batch_size` records (fewer at the end of the file) of the
    header's width, in valid UTF-8 without CR, NUL or empty lines, each record the lines up
    to the first one at which its count of `"` is even (`_bare_lines`), no line or record
    longer than `LONG_LINE_BYTES` (see `_plain_batch`), and either no empty value or
    no `""` in its record (so every empty value is null). A batch without a quote is split by
    `str.split`, which gives what `csv.reader` gives for such lines; one with quotes goes
    through one `csv.reader` call over its records, which must give one row per record (a
    quote that does not open a field, say, gives fewer). Its records come a column at a time
    (`ColumnRecords`). None for anything else, which the next reader reads from `begin`."""
    stream.seek(begin.offset)
    read = _bare_lines(stream, batch_size)
    if read is None:
        return None
    data, starts = read
    if not data or b"\r" in data or b"\x00" in data or b"\n\n" in data or data[:1] == b"\n":
        return None
    size, empty_quoted = len(data), b'""' in data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    del data
    ends_line = text.endswith("\n")
    lines = (text[:-1] if ends_line else text).split("\n")
    del text
    if starts is None:  # no quote: one record per line
        texts, first_lines = lines, None
        rows = [line.split(delimiter) for line in lines]
    else:
        bounds = [*starts, len(lines)]
        texts = [lines[i] if j == i + 1 else "\n".join(lines[i:j]) for i, j in pairwise(bounds)]
        first_lines = [begin.line + i for i in starts]
        try:
            rows = list(csv.reader(texts, delimiter=delimiter, strict=True))
        except csv.Error:
            return None
    width = len(header)
    if len(rows) != len(texts) or set(map(len, rows)) != {width}:
        return None
    columns = [list(column) for column in zip(*rows, strict=True)]
    del rows
    for column in columns:
        if "" in column:
            if empty_quoted and any(
                v == "" and '""' in t for v, t in zip(column, texts, strict=True)
            ):
                return None  # that empty value may be a quoted one (`""`), not null
            column[:] = [None if v == "" else v for v in column]
    end = Position(begin.offset + size, begin.line + len(lines) - (not ends_line))
    stream.seek(end.offset)
    records = ColumnRecords(header, columns, begin.line, first_lines)
    return RawBatch(records, [], end, list(header))


def _bare_lines(stream: BinaryIO, batch_size: int) -> tuple[bytes, list[int] | None] | None:
    """The bytes of the next `batch_size` records as `_bare_batch` reads them (whole lines,
    pulled in C), and the index of each record's first line, None when the batch holds no
    quote (every line is then a record). A record ends at the first line at which its count
    of `"` is even. None when a quote is still open at the end of the file, or a line (or,
    in a batch with quotes, a record) is longer than `LONG_LINE_BYTES`."""
    raw = some_lines(stream, batch_size)
    if raw is None:
        return None  # `_plain_batch` splits a long record holding one copy of it at a time
    data = b"".join(raw)
    if b'"' not in data:
        return data, None
    starts: list[int] = []
    count, lines, record_bytes = 0, 0, 0
    while len(starts) < batch_size or count % 2:
        if not raw:
            if count % 2:
                return None  # a quote open to the end of the file: the exact reader's
            break
        for line in raw:
            if not count % 2:
                starts.append(lines)
                record_bytes = 0
            record_bytes += len(line)
            count += line.count(b'"')
            lines += 1
            if record_bytes > LONG_LINE_BYTES:
                return None  # a long quoted record: `csv.reader` would hold 4 bytes a char
        more = batch_size - len(starts) if not count % 2 else 1
        raw = some_lines(stream, more) if more > 0 else []
        if raw is None:
            return None
        if raw:
            data += b"".join(raw)
        elif not count % 2:
            break
    return data, starts


def _plain_batch(
    stream: BinaryIO, header: list[str], delimiter: str, batch_size: int, begin: Position
) -> RawBatch | None:
    """The common batch, read by `csv.reader` (decoding and splitting in C): records of the
    header's width, valid UTF-8, no CR anywhere, and either no empty value or no `""` in the
    batch's bytes (so every empty value is an unquoted one: null). None for anything else,
    which the exact reader then reads. A record longer than `LONG_LINE_BYTES` is split by
    `dag.csvlong`, not by `csv.reader`, whose field buffer takes 4 bytes a character (a
    50 MiB field would need 200 MiB there): the same fields."""
    stream.seek(begin.offset)
    seen = PlainSeen()
    reader = csv.reader(plain_lines(stream, delimiter, seen), delimiter=delimiter, strict=True)
    width, records, empty = len(header), [], False
    try:
        while len(records) < batch_size:
            line = begin.line + seen.lines
            seen.at_start = True
            fields = next(reader, None)
            if fields is None:
                break
            if seen.long and fields == LONG_FIELDS:
                fields, seen.long = seen.long, []
            if len(fields) != width:
                if fields:
                    return None
                continue  # an empty line (no CR in the batch: checked below)
            if "" in fields:
                empty = True
                fields = [None if f == "" else f for f in fields]
            records.append(RawRecord(line, dict(zip(header, fields, strict=True))))
    except (csv.Error, UnicodeDecodeError):
        return None
    end = begin.offset + seen.bytes
    cr, empty_quoted, last = _scan(stream, begin.offset, end)
    if cr or (empty and empty_quoted):
        return None
    stream.seek(end)
    line = begin.line + seen.lines - (seen.bytes > 0 and last != b"\n")
    return RawBatch(records, [], Position(end, line), list(header))


def _scan(stream: BinaryIO, begin: int, end: int) -> tuple[bool, bool, bytes]:
    """Whether the bytes `begin..end` hold a CR or `""`, and their last byte, read in
    chunks (a batch of one 50 MiB line is not read into memory twice)."""
    cr = empty_quoted = False
    stream.seek(begin)
    tail = b""
    while begin < end:
        part = stream.read(min(_SCAN_BYTES, end - begin))
        if not part:
            break
        begin += len(part)
        chunk = tail + part  # a `""` may straddle two chunks
        cr = cr or b"\r" in part
        empty_quoted = empty_quoted or b'""' in chunk
        tail = part[-1:]
    return cr, empty_quoted, tail


_SCAN_BYTES = 1 << 20
