"""Long CSV records, split apart from `csv.reader` (for `dag.csvparts`' plain reader).

`csv.reader` keeps the field it reads in a buffer of 4 bytes a character: one 50 MiB field
costs 200 MiB there, on top of its line, the line decoded and the field itself. A record
longer than `LONG_LINE_BYTES` (one line, or several when a quoted field holds line ends) is
split here instead, on its bytes, each field decoded straight from them, so that the
record's bytes and its fields are all it holds. The fields are those `csv.reader(strict=
True)` gives. A record this splitter cannot vouch for (a line end outside quotes, a quote
left open, a closing quote followed by anything but the delimiter, invalid UTF-8) goes to
`csv.reader` as it is, which reads it the same way or refuses it.

Only a line that `csv.reader` asks for as the first of a record (`PlainSeen.at_start`, set
by the caller before each record) can begin a long record: a line in the middle of a record
as `csv.reader` sees it is passed on untouched."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from itertools import islice
from typing import BinaryIO

LONG_LINE_BYTES = 1 << 16
LONG_LINE = "\x00long line\n"  # what csv.reader reads in place of a long record
LONG_FIELDS = [LONG_LINE[:-1]]


class PlainSeen:
    """What the lines of a plain batch held so far: lines and bytes read, the fields of a
    long record split aside, and whether `csv.reader` is about to start a record."""

    def __init__(self) -> None:
        self.lines = self.bytes = 0
        self.long: list[str] = []
        self.at_start = True


def plain_lines(stream: BinaryIO, delimiter: str, seen: PlainSeen) -> Iterator[str]:
    """The batch's lines for `csv.reader`, which pulls exactly the lines one record needs;
    a record longer than `LONG_LINE_BYTES` is split into `seen.long` and read as
    `LONG_LINE` (or, when it cannot be split here, given whole to `csv.reader`)."""
    sep = delimiter.encode()
    for raw in short_lines(stream):
        starts, seen.at_start = seen.at_start, False
        if len(raw) <= LONG_LINE_BYTES and (not starts or not raw.count(b'"') % 2):
            seen.lines += 1
            seen.bytes += len(raw)
            yield raw.decode()
            continue
        short, record = _gather(raw, stream, whole=starts)
        del raw
        if short is not None:  # a short record over several lines: line by line
            for line in short:
                seen.lines += 1
                seen.bytes += len(line)
                yield line.decode()
            continue
        seen.lines += record.count(b"\n") + (not record.endswith(b"\n"))
        seen.bytes += len(record)
        pieces = _field_pieces(record, sep) if starts else None
        if pieces is None:
            yield record.decode()
            continue
        del record  # one copy of a long record at a time: its fields now
        seen.long = ["".join(p) for p in pieces]
        del pieces
        yield LONG_LINE


def short_lines(stream: BinaryIO) -> Iterator[bytes]:
    """The stream's lines, a line longer than `LONG_LINE_BYTES` cut after `LONG_LINE_BYTES
    + 1` bytes (the rest of it comes as the next line): a long line is never read whole
    by the buffered reader, which joins the pieces of a long line into a second copy."""
    return iter(partial(stream.readline, LONG_LINE_BYTES + 1), b"")


def some_lines(stream: BinaryIO, count: int) -> list[bytes] | None:
    """The next `count` lines (fewer at the end of the file); None as soon as one is
    longer than `LONG_LINE_BYTES` (read 16 lines at a time, then more: not all of a long
    one)."""
    lines: list[bytes] = []
    pull, step = short_lines(stream), 16
    while len(lines) < count:
        part = list(islice(pull, min(step, count - len(lines))))
        step = min(step * 4, 1024)
        if not part:
            break
        if max(map(len, part)) > LONG_LINE_BYTES:
            return None
        lines += part
    return lines


def _gather(first: bytes, stream: BinaryIO, whole: bool) -> tuple[list[bytes] | None, bytearray]:
    """The lines of the record that `first` begins (`whole`; else of the line it begins):
    up to the first line end at which its count of `"` is even (or the end of the file).
    Its lines when it is at most `LONG_LINE_BYTES` long; its bytes otherwise, read in
    pieces into one buffer."""
    quotes, size, lines = first.count(b'"'), len(first), [first]
    while whole and quotes % 2 and size <= LONG_LINE_BYTES:
        line = stream.readline(LONG_LINE_BYTES + 1)
        if not line:
            break
        quotes, size = quotes + line.count(b'"'), size + len(line)
        lines.append(line)
    if size <= LONG_LINE_BYTES:
        return lines, bytearray()
    record = bytearray().join(lines)
    del lines
    while not record.endswith(b"\n") or (whole and quotes % 2):
        piece = stream.readline(_PIECE_BYTES)
        if not piece:
            break
        quotes += piece.count(b'"')
        record += piece
    return None, record


_PIECE_BYTES = 1 << 20


def _field_pieces(record: bytearray, sep: bytes) -> list[list[str]] | None:
    """Each field of `record` (one record, its line end included) as `csv.reader(strict=
    True)` reads it, as decoded pieces to join (a quoted field's doubled quotes split it);
    None for a record this does not vouch for (see the module docstring)."""
    end = len(record) - (record.endswith(b"\n"))
    view = memoryview(record)
    fields: list[list[str]] = []
    i = 0
    try:
        while True:
            if record.startswith(b'"', i):
                pieces, i = _quoted(record, view, i + 1, end)
                if pieces is None or (i < end and not record.startswith(sep, i)):
                    return None
            else:
                j = record.find(sep, i, end)
                j = end if j < 0 else j
                if record.find(b"\n", i, j) >= 0:
                    return None  # a line end outside quotes: csv.reader ends the record
                pieces, i = [str(view[i:j], "utf-8")], j
            fields.append(pieces)
            if i >= end:
                return fields
            i += len(sep)
    except UnicodeDecodeError:
        return None
    finally:
        view.release()


def _quoted(record: bytearray, view: memoryview, i: int, end: int) -> tuple[list[str] | None, int]:
    """The pieces of the quoted field whose text starts at `i`, and the index after its
    closing quote; None when it does not close before `end`."""
    pieces = []
    while True:
        j = record.find(b'"', i, end)
        if j < 0:
            return None, end
        pieces.append(str(view[i:j], "utf-8"))
        if record.startswith(b'"', j + 1) and j + 1 < end:
            pieces.append('"')
            i = j + 2
            continue
        return pieces, j + 1
