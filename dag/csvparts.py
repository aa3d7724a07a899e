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
  (`"ab"c`); and a quote left open at the end of the file, which makes the rest of the file
  that one bad record.
- Reading goes on after the malformed record. When the record broke off with an odd number
  of `"` characters, a quoted field was still open, and its tail on the following lines is
  no record: the bad record then runs to the end of the first line at which its quotes
  balance (or to the end of the file), and all those lines go to `raw` together. So the
  damaged lines are rejected, never imported as an invented record
  (`"p"q,"r` + newline + `s",t` is one bad record, not a bad one and `{a: 's"', b: 't'}`).
- A field longer than `FIELD_LIMIT_BYTES` (longer than an ingest file may be) raises
  `CsvFormatError`: the reader would otherwise resume inside that quoted field.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from itertools import pairwise
from typing import BinaryIO

from dag.csvlong import LONG_FIELDS, LONG_LINE_BYTES, PlainSeen, plain_lines, some_lines
from dag.errors import CsvFormatError
from dag.limits import BATCH_SIZE, MAX_SOURCE_BYTES
from dag.records import ColumnRecords, Position, RawBatch, RawRecord, RowError

__all__ = ["read_csv_batches"]

_BOM = b"\xef\xbb\xbf"
# No field of a file an ingest may read is longer than the file itself.
FIELD_LIMIT_BYTES = MAX_SOURCE_BYTES + 1


class _LineFeed:
    """Physical lines for `csv.reader`, remembering what the current record consumed.

    `csv.reader` pulls exactly the lines one record needs and never reads ahead, so after
    each row `offset`/`line` are the position of the next record and `pulled` holds the
    text of the row just read.
    """

    def __init__(self, stream: BinaryIO, offset: int, line: int) -> None:
        self.offset = offset
        self.line = line  # number of the next physical line to be read
        self.pulled: list[str] = []
        self.bad_utf8 = False
        self.exhausted = False
        self._stream = stream

    def start_record(self) -> int:
        """Forget the previous record; return the line where the next one starts."""
        self.pulled = []
        self.bad_utf8 = False
        return self.line

    def lines(self) -> Iterator[str]:
        for raw in self._stream:
            self.offset += len(raw)
            if raw.endswith(b"\n"):  # only the file's last line may lack one
                self.line += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                # A multi-byte sequence never contains b"\n", so decoding line by line is
                # exact; keep going so the following records still parse.
                text = raw.decode("utf-8", "replace")
                self.bad_utf8 = True
            self.pulled.append(text)
            yield text
        self.exhausted = True

    def record_text(self) -> str:
        text = "".join(self.pulled)
        if text.endswith("\r\n"):
            return text[:-2]
        if text.endswith("\n"):
            return text[:-1]
        return text


def _has_lone_cr(text: str, delimiter: str) -> bool:
    """True when a carriage return outside quotes in `text` (one record) is not part of a
    CRLF. `csv.reader` silently takes such a CR for a line end, which the contract forbids."""
    if "\r" not in text or text.count("\r") == text.count("\r\n"):
        return False  # the common cases: no CR, or only CRLF line ends
    i, n, field_start = 0, len(text), True
    while i < n:
        c = text[i]
        if field_start and c == '"':
            i += 1
            while True:  # skip the quoted field, doubled quotes included
                j = text.find('"', i)
                if j < 0:
                    return False  # open quote: csv.reader reports that itself
                if j + 1 < n and text[j + 1] == '"':
                    i = j + 2
                    continue
                i = j + 1
                break
            field_start = False
            continue
        if c == "\r":
            if not text.startswith("\n", i + 1):
                return True
            i += 2
            field_start = True
            continue
        field_start = c in (delimiter, "\n")
        i += 1
    return False


def _quoted_flags(text: str, delimiter: str) -> list[bool]:
    """Which fields of a well-formed record were quoted (only used when one is empty)."""
    flags: list[bool] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == '"':
            flags.append(True)
            i += 1
            while True:
                j = text.index('"', i)
                if j + 1 < n and text[j + 1] == '"':
                    i = j + 2
                    continue
                i = j + 1
                break
        else:
            flags.append(False)
        # Skip to the end of the field: the next delimiter or the end of the record.
        while i < n and text[i] != delimiter and text[i] not in "\r\n":
            i += 1
        if i >= n or text[i] != delimiter:
            return flags
        i += 1


def _values(fields: list[str], text: str, delimiter: str) -> list[str | None]:
    """csv.reader gives '' for both `,,` and `,"",`: tell them apart (null vs '')."""
    if "" not in fields:
        return fields  # type: ignore[return-value]
    if '""' not in text:
        return [None if f == "" else f for f in fields]
    flags = _quoted_flags(text, delimiter)
    return [None if f == "" and not q else f for f, q in zip(fields, flags, strict=True)]


def _parse_header(stream: BinaryIO, delimiter: str) -> tuple[list[str], Position]:
    """Read the header from offset 0; return it and the position right after it."""
    stream.seek(0)
    offset = 0
    if stream.read(3) == _BOM:
        offset = 3
    stream.seek(offset)
    feed = _LineFeed(stream, offset, 1)
    reader = csv.reader(feed.lines(), delimiter=delimiter, strict=True)
    while True:
        line = feed.start_record()
        try:
            fields = next(reader)
        except StopIteration:
            raise CsvFormatError("no header record: the file is empty", line=1) from None
        except csv.Error as exc:
            raise CsvFormatError(f"malformed header: {exc}", line=line) from None
        if _has_lone_cr("".join(feed.pulled), delimiter):
            message = "malformed header: a carriage return (CR) outside quotes without LF"
            raise CsvFormatError(message, line=line)
        if fields:
            break
    if feed.bad_utf8:
        raise CsvFormatError("invalid UTF-8 in the header", line=line)
    seen: set[str] = set()
    for index, name in enumerate(fields, start=1):
        if name == "":
            raise CsvFormatError(f"header column {index} has an empty name", line=line)
        if name in seen:
            raise CsvFormatError(f"duplicate header column {name!r}", line=line)
        seen.add(name)
    return fields, Position(feed.offset, feed.line)


def _skip_open_quote(feed: _LineFeed, lines: Iterator[str]) -> None:
    """After a malformed record: while its quotes are unbalanced (a quoted field was still
    open where it broke off), pull whole lines into it, so the field's tail is rejected
    with it instead of being parsed as a record of its own."""
    quotes = sum(text.count('"') for text in feed.pulled)
    while quotes % 2:
        text = next(lines, None)
        if text is None:
            return
        quotes += text.count('"')


def _malformed(exc: csv.Error, feed: _LineFeed, lines: Iterator[str], line: int) -> RowError:
    """The row error of a record the csv module refused; reading resumes after it (and after
    the rest of a quoted field it left open, see `_skip_open_quote`)."""
    if "field larger than field limit" in str(exc):
        # The reader stopped inside a quoted field: going on from the next physical line
        # would read a record out of the middle of that field.
        raise CsvFormatError(
            f"a field is longer than {FIELD_LIMIT_BYTES} bytes", line=line
        ) from exc
    _skip_open_quote(feed, lines)
    if feed.exhausted and "".join(feed.pulled).count('"') % 2:
        reason = "unterminated quoted field: it runs to the end of the file"
    else:
        reason = f"malformed CSV record: {exc}"
    return RowError(reason, line=line, raw=feed.record_text())


def _record(
    fields: list[str], text: str, feed: _LineFeed, header: list[str], delimiter: str, line: int
) -> RawRecord | RowError:
    """A parsed record (`text`: the lines it was read from), or the row error that makes it
    unusable (a lone CR outside quotes, invalid UTF-8, the wrong number of fields)."""
    if _has_lone_cr(text, delimiter):
        reason = "malformed CSV record: a carriage return (CR) outside quotes without LF"
        return RowError(reason, line=line, raw=feed.record_text())
    if feed.bad_utf8:
        return RowError("invalid UTF-8", line=line, raw=feed.record_text())
    if len(fields) != len(header):
        reason = f"wrong number of fields: expected {len(header)}, found {len(fields)}"
        return RowError(reason, line=line, raw=feed.record_text())
    values = _values(fields, text, delimiter)
    return RawRecord(line, dict(zip(header, values, strict=True)))


def read_csv_batches(
    stream: BinaryIO,
    *,
    delimiter: str = ",",
    batch_size: int = BATCH_SIZE,
    start: Position | None = None,
) -> Iterator[RawBatch]:
    """Yield batches of at most `batch_size` records (see the module docstring).

    Each batch is first read by `_bare_batch`, for the commonest batch of all (one record
    per line, no quote spanning lines): whole lines at a time, its records a column at a time
    (`ColumnRecords`). A batch it cannot vouch for goes to `_plain_batch`, which does no
    per-line Python work, and a batch that one cannot vouch for is read again by
    `_exact_batch`, which follows every rule of the contract line by line. All three end a
    batch at the same record, so where batches end never depends on which reader read them.
    After two misses of a reader in a row, the rest of the file skips it (a file full of rare
    cases pays for each quicker try twice, not always)."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if len(delimiter) != 1 or delimiter in '"\r\n':
        raise ValueError(f"unusable CSV delimiter {delimiter!r}")
    if csv.field_size_limit() < FIELD_LIMIT_BYTES:
        csv.field_size_limit(FIELD_LIMIT_BYTES)
    header, after_header = _parse_header(stream, delimiter)
    position = after_header if start is None or start.offset <= after_header.offset else start
    yielded, bare_misses, misses = False, 0, 0
    while True:
        batch = None
        if bare_misses < 2:
            batch = _bare_batch(stream, header, delimiter, batch_size, position)
            bare_misses = 0 if batch is not None else bare_misses + 1
        if batch is None and misses < 2:
            batch = _plain_batch(stream, header, delimiter, batch_size, position)
            misses = 0 if batch is not None else misses + 1
        if batch is None:
            batch = _exact_batch(stream, header, delimiter, batch_size, position)
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
    which `_exact_batch` then reads. A record longer than `LONG_LINE_BYTES` is split by
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


def _exact_batch(
    stream: BinaryIO, header: list[str], delimiter: str, batch_size: int, begin: Position
) -> RawBatch:
    """One batch from `begin`, read line by line with every rule of the contract (possibly
    empty at the end of the file)."""
    stream.seek(begin.offset)
    feed = _LineFeed(stream, begin.offset, begin.line)
    lines = feed.lines()
    reader = csv.reader(lines, delimiter=delimiter, strict=True)
    width = len(header)
    records: list[RawRecord] = []
    errors: list[RowError] = []
    while len(records) + len(errors) < batch_size:
        line = feed.start_record()
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            errors.append(_malformed(exc, feed, lines, line))
        else:
            text = "".join(feed.pulled)
            if len(fields) == width and "\r" not in text and "" not in fields and not feed.bad_utf8:
                # The common case, which `_record` would take as it is: spare its checks.
                records.append(RawRecord(line, dict(zip(header, fields, strict=True))))
            else:
                if not fields and not _has_lone_cr(text, delimiter):
                    continue  # an empty line
                read = _record(fields, text, feed, header, delimiter, line)
                (records if isinstance(read, RawRecord) else errors).append(read)
    return RawBatch(records, errors, Position(feed.offset, feed.line), list(header))
