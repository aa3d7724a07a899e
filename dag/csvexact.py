"""The exact CSV reader: line by line, every rule of `dag.csvparts`' contract.

`dag.csvparts` tries quicker readers first; this one reads the header and every batch they
cannot vouch for, and is the reference they must agree with. Malformed records resume by
the recovery rule of `dag.csvresync`."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import BinaryIO

from dag.csvresync import QuoteParity, needs_resync, resync
from dag.errors import CsvFormatError
from dag.limits import MAX_SOURCE_BYTES
from dag.records import Position, RawBatch, RawRecord, RowError

__all__ = ["FIELD_LIMIT_BYTES", "ExactReader", "parse_header"]

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
        self.record_offset = offset
        self._stream = stream

    def start_record(self) -> int:
        """Forget the previous record; return the line where the next one starts."""
        self.pulled = []
        self.bad_utf8 = False
        self.record_offset = self.offset
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


def _has_lone_cr(text: str, delimiter: str, quote: str = '"') -> bool:
    """True when a carriage return outside quotes in `text` (one record) is not part of a
    CRLF. `csv.reader` silently takes such a CR for a line end, which the contract forbids."""
    if "\r" not in text or text.count("\r") == text.count("\r\n"):
        return False  # the common cases: no CR, or only CRLF line ends
    i, n, field_start = 0, len(text), True
    while i < n:
        c = text[i]
        if field_start and c == quote:
            i += 1
            while True:  # skip the quoted field, doubled quotes included
                j = text.find(quote, i)
                if j < 0:
                    return False  # open quote: csv.reader reports that itself
                if j + 1 < n and text[j + 1] == quote:
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


def _quoted_flags(text: str, delimiter: str, quote: str) -> list[bool]:
    """Which fields of a well-formed record were quoted (only used when one is empty)."""
    flags: list[bool] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == quote:
            flags.append(True)
            i += 1
            while True:
                j = text.index(quote, i)
                if j + 1 < n and text[j + 1] == quote:
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


def _values(fields: list[str], text: str, delimiter: str, quote: str) -> list[str | None]:
    """csv.reader gives '' for both `,,` and `,"",`: tell them apart (null vs '')."""
    if "" not in fields:
        return fields  # type: ignore[return-value]
    if quote * 2 not in text:
        return [None if f == "" else f for f in fields]
    flags = _quoted_flags(text, delimiter, quote)
    return [None if f == "" and not q else f for f, q in zip(fields, flags, strict=True)]


def parse_header(stream: BinaryIO, delimiter: str, quote: str) -> tuple[list[str], Position]:
    """Read the header from offset 0; return it and the position right after it."""
    stream.seek(0)
    offset = 0
    if stream.read(3) == _BOM:
        offset = 3
    stream.seek(offset)
    feed = _LineFeed(stream, offset, 1)
    reader = csv.reader(feed.lines(), delimiter=delimiter, quotechar=quote, strict=True)
    while True:
        line = feed.start_record()
        try:
            fields = next(reader)
        except StopIteration:
            raise CsvFormatError("no header record: the file is empty", line=1) from None
        except csv.Error as exc:
            raise CsvFormatError(f"malformed header: {exc}", line=line) from None
        if _has_lone_cr("".join(feed.pulled), delimiter, quote):
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


def _malformed(
    reason: str, feed: _LineFeed, stream: BinaryIO, line: int, parity: QuoteParity, quote: str
) -> tuple[RowError, bool]:
    """The row error of a malformed record, and whether reading resumes somewhere else than
    where the csv module stopped: the recovery rule of `dag.csvresync` (the stream and
    `feed` are then at the line where reading resumes)."""
    if not needs_resync(feed.pulled, quote):
        return RowError(reason, line=line, raw=feed.record_text()), False
    raw, resume = resync(stream, Position(feed.record_offset, line), parity, quote)
    feed.offset, feed.line = resume.offset, resume.line
    return RowError(reason, line=line, raw=raw), True


def _refused(exc: csv.Error, feed: _LineFeed, line: int, quote: str) -> str:
    """Why the csv module refused a record (a field too long to resume after raises)."""
    if "field larger than field limit" in str(exc):
        # The reader stopped inside a quoted field: going on from the next physical line
        # would read a record out of the middle of that field.
        raise CsvFormatError(
            f"a field is longer than {FIELD_LIMIT_BYTES} bytes", line=line
        ) from exc
    if feed.exhausted and "".join(feed.pulled).count(quote) % 2:
        return "unterminated quoted field: no quote closes it before the end of the file"
    return f"malformed CSV record: {exc}"


def _record(
    fields: list[str],
    text: str,
    feed: _LineFeed,
    header: list[str],
    dialect: tuple[str, str],
    line: int,
) -> RawRecord | RowError:
    """A parsed record (`text`: the lines it was read from), or the row error that makes it
    unusable (a lone CR outside quotes, invalid UTF-8, the wrong number of fields)."""
    delimiter, quote = dialect
    if _has_lone_cr(text, delimiter, quote):
        reason = "malformed CSV record: a carriage return (CR) outside quotes without LF"
        return RowError(reason, line=line, raw=feed.record_text())
    if feed.bad_utf8:
        return RowError("invalid UTF-8", line=line, raw=feed.record_text())
    if len(fields) != len(header):
        reason = f"wrong number of fields: expected {len(header)}, found {len(fields)}"
        return RowError(reason, line=line, raw=feed.record_text())
    values = _values(fields, text, delimiter, quote)
    return RawRecord(line, dict(zip(header, values, strict=True)))


class ExactReader:
    """Reads batches line by line with every rule of the contract; malformed records resume
    by the recovery rule (`dag.csvresync`), whose quote count it keeps across batches."""

    def __init__(self, stream: BinaryIO, header: list[str], dialect: tuple[str, str]) -> None:
        self.stream, self.header, self.dialect = stream, header, dialect
        self.parity = QuoteParity(stream, dialect[1])

    def batch(self, batch_size: int, begin: Position) -> RawBatch:
        """One batch from `begin` (possibly empty at the end of the file)."""
        stream, header, (delimiter, quote) = self.stream, self.header, self.dialect
        stream.seek(begin.offset)
        feed = _LineFeed(stream, begin.offset, begin.line)
        lines = feed.lines()
        reader = csv.reader(lines, delimiter=delimiter, quotechar=quote, strict=True)
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
                read: RawRecord | RowError = RowError(_refused(exc, feed, line, quote), line=line)
            else:
                text = "".join(feed.pulled)
                plain = len(fields) == width and "\r" not in text and "" not in fields
                if plain and not feed.bad_utf8:  # the common case, which `_record` would take
                    records.append(RawRecord(line, dict(zip(header, fields, strict=True))))
                    continue
                if not fields and not _has_lone_cr(text, delimiter, quote):
                    continue  # an empty line
                read = _record(fields, text, feed, header, self.dialect, line)
            if isinstance(read, RawRecord):
                records.append(read)
                continue
            if read.raw is not None and not read.reason.startswith("wrong number"):
                errors.append(read)  # CR, UTF-8: the record's bounds are the csv module's
                continue
            error, moved = _malformed(read.reason, feed, stream, line, self.parity, quote)
            errors.append(error)
            if moved:
                lines = feed.lines()
                reader = csv.reader(lines, delimiter=delimiter, quotechar=quote, strict=True)
        return RawBatch(records, errors, Position(feed.offset, feed.line), list(header))
