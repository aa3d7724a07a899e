"""JSON Lines and JSON-array input in the same resumable batches as CSV (`dag.csvparts`).

Shared contract:

- The stream is a seekable, buffered binary file holding UTF-8. Each input record carries
  the physical (1-based) line number where it starts.
- The header (column order) is the keys of the first JSON object, followed by keys first
  seen in the other objects of the first batch (the first `batch_size` input records), in
  the order they appear. A resume re-reads that first batch to rebuild the same header,
  so resuming needs the same `batch_size`. In every record a missing key is `None`; a key
  that is not in the header is a row error `unknown column` (column = that key).
- A batch holds at most `batch_size` input records (good and bad) and ends with `end`,
  the position where the next record starts; passing it back as `start` yields exactly
  the remaining records. At least one batch (possibly empty) is always yielded.
- A record that is not a JSON object, or contains invalid UTF-8, is a row error with its
  line; `raw` is the record's text (decoded with `errors="replace"` if needed). The text of
  a good record longer than 64 KiB is not kept beside its value: when such a record has an
  unknown column, `raw` is its value encoded again (`json.dumps`).
- A long value costs its bytes once and its text once: a long line or element is read
  into one buffer and decoded from it, and let go before the text is parsed.

JSON Lines (`read_jsonl_batches`): one value per line; blank lines are skipped; a line that
is not valid JSON is a row error too, and reading goes on with the next line.

JSON array (`read_json_batches`): the file is one top-level array of objects, parsed
incrementally (one element in memory at a time, never the whole file). `end.offset` is the
byte offset after an element's trailing comma and white space. A syntax error that leaves
the rest unreadable (no array, a broken element, a missing comma, trailing data) raises
`InputDataError` with the line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from itertools import chain, islice
from typing import Any, BinaryIO

from dag.errors import InputDataError
from dag.limits import BATCH_SIZE
from dag.records import Position, RawBatch, RawRecord, RowError

__all__ = ["read_json_batches", "read_jsonl_batches"]

_WS = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"
_CHUNK_BYTES = 64 * 1024
_PIECE_BYTES = 1 << 20
_NOT_WS = re.compile(rb"[^ \t\r\n]")
_STRUCTURE = re.compile(rb'["{}\[\]]')
_SCALAR_END = re.compile(rb"[,\]} \t\r\n]")

# One input record as the scanners see it: where it starts, its decoded value (or the
# reason it is bad), its text for reject files, and the position after it.
_Item = tuple[int, Any, str | None, str, Position]
# A format's scanner: the position of the first record (or of `start`) and the items.
_Scan = Callable[[BinaryIO, Position | None], tuple[Position, Iterator[_Item]]]


def _decode(data: bytes | bytearray, begin: int = 0, end: int | None = None) -> tuple[str, bool]:
    """`data[begin:end]` decoded (with `errors="replace"` and False when it is not UTF-8),
    straight from `data`: no copy of the bytes first."""
    with memoryview(data) as view:
        part = view[begin:end]
        try:
            return str(part, "utf-8"), True
        except UnicodeDecodeError:
            return str(part, "utf-8", "replace"), False
        finally:
            part.release()


def _string_end(buf: bytes | bytearray, i: int) -> int:
    """The index after the JSON string whose opening quote is at `i`; -1 when it does not
    end within `buf`. Found with `find` (a regular expression backtracked over a long
    string each time the buffer grew)."""
    j = i + 1
    while True:
        j = buf.find(b'"', j)
        if j < 0:
            return -1
        k = j
        while buf[k - 1] == 0x5C and k - 1 > i:  # the backslashes before it
            k -= 1
        if not (j - k) % 2:
            return j + 1
        j += 1


def _read_line(stream: BinaryIO) -> bytes | bytearray:
    """The next line (b"" at the end of the file); a long one read in pieces into one
    buffer, not joined from the buffered reader's pieces into a second copy."""
    line = stream.readline(_CHUNK_BYTES + 1)
    if len(line) <= _CHUNK_BYTES or line.endswith(b"\n"):
        return line
    long = bytearray(line)
    del line
    while not long.endswith(b"\n"):
        piece = stream.readline(_PIECE_BYTES)
        if not piece:
            break
        long += piece
    return long


def _line_end(raw: bytes | bytearray) -> int:
    """Where the text of a line ends: before its trailing CRs and LFs."""
    end = len(raw)
    while end and raw[end - 1] in b"\r\n":
        end -= 1
    return end


def _header_of(items: list[_Item]) -> list[str]:
    header: dict[str, None] = {}
    for _, value, problem, _, _ in items:
        if problem is None:
            header.update(dict.fromkeys(value))
    return list(header)


def _batches(
    items: Iterator[_Item], header: list[str], batch_size: int, begin: Position
) -> Iterator[RawBatch]:
    known = set(header)
    records: list[RawRecord] = []
    errors: list[RowError] = []
    end = begin
    yielded = False
    for line, value, problem, text, end in items:
        if problem is not None:
            errors.append(RowError(problem, line=line, raw=text))
        else:
            unknown = [key for key in value if key not in known]
            if unknown:
                errors.append(
                    RowError(
                        f"unknown column {unknown[0]!r} (not in the first batch)",
                        line=line,
                        column=unknown[0],
                        raw=text or json.dumps(value, ensure_ascii=False),
                    )
                )
            else:
                records.append(RawRecord(line, {name: value.get(name) for name in header}))
        if len(records) + len(errors) >= batch_size:
            yield RawBatch(records, errors, end, list(header))
            yielded = True
            records, errors = [], []
    if records or errors or not yielded:
        yield RawBatch(records, errors, end, list(header))


def _read_batches(
    scan: _Scan, stream: BinaryIO, batch_size: int, start: Position | None
) -> Iterator[RawBatch]:
    """Header from the first batch, then batches from `start` (shared by both formats)."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    first_start, items = scan(stream, None)
    first = list(islice(items, batch_size))
    header = _header_of(first)
    if start is None or start.offset <= first_start.offset:
        yield from _batches(chain(first, items), header, batch_size, first_start)
        return
    # Resume: the header came from the first batch; now read on from `start`.
    begin, items = scan(stream, start)
    yield from _batches(items, header, batch_size, begin)


# JSON Lines ---------------------------------------------------------------------------


def _scan_jsonl(stream: BinaryIO, start: Position | None) -> tuple[Position, Iterator[_Item]]:
    if start is None:
        stream.seek(0)
        begin = Position(3, 1) if stream.read(3) == _BOM else Position(0, 1)
    else:
        begin = start
    stream.seek(begin.offset)

    def items() -> Iterator[_Item]:
        offset, line = begin.offset, begin.line
        while raw := _read_line(stream):
            here = line
            offset += len(raw)
            if raw.endswith(b"\n"):  # only the file's last line may lack one
                line += 1
            if not _NOT_WS.search(raw):
                continue
            text, valid = _decode(raw, 0, _line_end(raw))
            del raw  # its text now, then its value
            value: Any = None
            if not valid:
                problem: str | None = "invalid UTF-8"
            else:
                try:
                    value = json.loads(text)
                except ValueError as exc:
                    problem = f"invalid JSON: {exc}"
                except RecursionError:
                    problem = "invalid JSON: nested too deeply"
                else:
                    problem = None if isinstance(value, dict) else "not a JSON object"
            if problem is None and len(text) > _CHUNK_BYTES:
                text = ""  # not held beside its value (see `_batches`)
            yield here, value, problem, text, Position(offset, line)

    return begin, items()


def read_jsonl_batches(
    stream: BinaryIO, *, batch_size: int = BATCH_SIZE, start: Position | None = None
) -> Iterator[RawBatch]:
    """Yield batches of JSON Lines records (see the module docstring)."""
    return _read_batches(_scan_jsonl, stream, batch_size, start)


# JSON array ---------------------------------------------------------------------------


class _NeedMore(Exception):
    """The buffer ends inside the element being scanned: read more and scan again."""


class _ArrayScanner:
    """Elements of a top-level JSON array from a binary stream, one buffer at a time.

    Structural characters are ASCII and never occur inside a UTF-8 multi-byte sequence,
    so the element boundaries are found on the bytes and the offsets are exact.
    """

    def __init__(self, stream: BinaryIO, offset: int, line: int) -> None:
        self._stream = stream
        self._buf = bytearray()
        self._base = offset  # byte offset of _buf[0]
        self._pos = 0  # position in _buf
        self._line = line  # line number at _pos
        self._eof = False
        stream.seek(offset)

    @property
    def position(self) -> Position:
        return Position(self._base + self._pos, self._line)

    def _fill(self) -> bool:
        """Read more bytes (doubling, so rescanning a big element stays linear)."""
        if self._eof:
            return False
        data = self._stream.read(max(_CHUNK_BYTES, len(self._buf) - self._pos))
        if not data:
            self._eof = True
            return False
        del self._buf[: self._pos]
        self._buf += data
        self._base += self._pos
        self._pos = 0
        return True

    def _advance(self, to: int) -> None:
        self._line += self._buf.count(b"\n", self._pos, to)
        self._pos = to

    def fail(self, message: str) -> InputDataError:
        return InputDataError(f"invalid JSON array: {message}", line=self._line)

    def peek(self) -> bytes:
        """Skip white space; the next byte, or b"" at the end of the file."""
        while True:
            match = _NOT_WS.search(self._buf, self._pos)
            if match:
                self._advance(match.start())
                return self._buf[self._pos : self._pos + 1]
            self._advance(len(self._buf))
            if not self._fill():
                return b""

    def expect(self, token: bytes) -> None:
        found = self.peek()
        if found != token:
            shown = found.decode(errors="replace") if found else "end of file"
            raise self.fail(f"expected {token.decode()!r}, found {shown!r}")
        self._advance(self._pos + 1)

    def _element_end(self) -> int:
        """End index of the element starting at _pos; raises _NeedMore if not buffered."""
        buf, i = self._buf, self._pos
        if buf[i : i + 1] == b'"':
            end = _string_end(buf, i)
            if end < 0:
                raise _NeedMore
            return end
        if buf[i : i + 1] not in (b"{", b"["):
            match = _SCALAR_END.search(buf, i)
            if match:
                return match.start()
            if self._eof:
                return len(buf)
            raise _NeedMore
        depth = 0
        while True:
            match = _STRUCTURE.search(buf, i)
            if not match:
                raise _NeedMore
            char = buf[match.start()]
            if char == 0x22:  # '"'
                i = _string_end(buf, match.start())
                if i < 0:
                    raise _NeedMore
            elif char in (0x7B, 0x5B):  # '{', '['
                depth += 1
                i = match.end()
            else:
                depth -= 1
                i = match.end()
                if depth == 0:
                    return i

    def element(self) -> tuple[int, str, bool]:
        """The next element's start line and text, and whether it is valid UTF-8 (see
        `_decode`); the cursor moves past it. A long element's bytes are let go."""
        while True:
            try:
                end = self._element_end()
                break
            except _NeedMore:
                if not self._fill():
                    raise self.fail("the file ends inside an element") from None
        line = self._line
        text, valid = _decode(self._buf, self._pos, end)
        self._advance(end)
        if end > _CHUNK_BYTES:
            del self._buf[:end]
            self._base += end
            self._pos = 0
        return line, text, valid

    def previous_token(self) -> bytes:
        """The last non-white-space byte before the cursor (b"" at the file start)."""
        offset = self._base + self._pos
        while offset > 0:
            size = min(_CHUNK_BYTES, offset)
            self._stream.seek(offset - size)
            chunk = self._stream.read(size).rstrip(_WS)
            if chunk:
                self._stream.seek(self._base + len(self._buf))
                return chunk[-1:]
            offset -= size
        self._stream.seek(self._base + len(self._buf))
        return b""


_ELEMENT_OR_END, _ELEMENT, _END = "element or end", "element", "end"


def _scan_json(stream: BinaryIO, start: Position | None) -> tuple[Position, Iterator[_Item]]:
    if start is None:
        stream.seek(0)
        scanner = _ArrayScanner(stream, 3 if stream.read(3) == _BOM else 0, 1)
        scanner.expect(b"[")
        state = _ELEMENT_OR_END
    else:
        scanner = _ArrayScanner(stream, start.offset, start.line)
        # A resume point follows either a comma (an element must come) or the last element
        # (only `]` may come): look back to know which, so `[1,]` fails however it is read.
        state = _ELEMENT if scanner.previous_token() == b"," else _END
    scanner.peek()
    begin = scanner.position

    def items() -> Iterator[_Item]:
        nonlocal state
        while True:
            token = scanner.peek()
            if state == _END and token != b"]":
                shown = token.decode(errors="replace") if token else "end of file"
                raise scanner.fail(f"expected ',' or ']', found {shown!r}")
            if state == _END or (state == _ELEMENT_OR_END and token == b"]"):
                scanner.expect(b"]")
                if scanner.peek():
                    raise scanner.fail("data after the end of the array")
                return
            if token in (b"", b",", b"]"):
                raise scanner.fail("expected an element")
            line, text, valid = scanner.element()
            value: Any = None
            problem: str | None = None
            if not valid:
                problem = "invalid UTF-8"
            else:
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    # exc.lineno counts from the element's first line.
                    where = line + exc.lineno - 1
                    raise InputDataError(f"invalid JSON: {exc.msg}", line=where) from None
                except RecursionError:
                    raise InputDataError("invalid JSON: nested too deeply", line=line) from None
                if not isinstance(value, dict):
                    problem = "not a JSON object"
            # The trailing comma and white space belong to the element, so the position
            # after them is where the next element starts.
            if scanner.peek() == b",":
                scanner.expect(b",")
                scanner.peek()
                state = _ELEMENT
            else:
                state = _END
            if problem is None and len(text) > _CHUNK_BYTES:
                text = ""  # not held beside its value (see `_batches`)
            yield line, value, problem, text, scanner.position

    return begin, items()


def read_json_batches(
    stream: BinaryIO, *, batch_size: int = BATCH_SIZE, start: Position | None = None
) -> Iterator[RawBatch]:
    """Yield batches of the elements of a top-level JSON array (see the module docstring)."""
    return _read_batches(_scan_json, stream, batch_size, start)
