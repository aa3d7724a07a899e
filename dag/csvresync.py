"""Where the CSV reader resumes after a malformed record: the recovery rule of reject mode.

A record the csv module refuses (a stray quote, text after a closing quote) or reads with
the wrong number of fields is one row error. When that record, as read, holds an odd
number of quote characters or spans more than one physical line, a quoted field may have
been opened by a stray quote, and where the record really ends is decided by the quote
parity of the rest of the file:

- The bad record starts at its first line L and ends at the first line M >= L such that the
  number of quote characters from the start of line M+1 to the end of the file is even, so
  the rest of the file, read from there, never ends inside a quoted field. Reading resumes
  at line M+1.
- So a stray quote that no later quote closes costs its own line only (`3,"open` then
  `4,5`: line L is rejected, `4,5` is read), and a quoted field broken in the middle whose
  tail a later quote closes (`"p"q,"r` then `s",t`) is rejected with that tail, which is
  never read as an invented record.

Any other malformed record (one line, an even number of quotes) is rejected alone and
reading resumes at the next line, as the csv module leaves it. The rule depends only on
the bytes from the record's start to the end of the file, so a resumed read (from a
checkpoint) gives the same records and row errors as one read straight through."""

from __future__ import annotations

from typing import BinaryIO

from dag.records import Position

__all__ = ["QuoteParity", "needs_resync", "resync"]

_CHUNK_BYTES = 1 << 20


def _odd_between(stream: BinaryIO, quote: bytes, begin: int, end: int | None) -> bool:
    """Whether the bytes `begin..end` (`end` None: to the end of the file) hold an odd
    number of `quote`, read in chunks."""
    stream.seek(begin)
    odd = False
    while end is None or begin < end:
        part = stream.read(_CHUNK_BYTES if end is None else min(_CHUNK_BYTES, end - begin))
        if not part:
            break
        begin += len(part)
        odd ^= bool(part.count(quote) % 2)
    return odd


class QuoteParity:
    """Whether the file holds an odd number of quote characters from an offset to its end.

    The first question counts to the end of the file; a later one at a higher offset counts
    only the bytes between the two offsets, so a file with many bad records is still read
    about twice, not once per bad record. The stream's position is not kept."""

    def __init__(self, stream: BinaryIO, quote: str) -> None:
        self._stream = stream
        self._quote = quote.encode()
        self._at: int | None = None
        self._odd = False

    def odd_from(self, offset: int) -> bool:
        """The parity of quote characters from `offset` to the end of the file."""
        if self._at is None or offset < self._at:
            self._odd = _odd_between(self._stream, self._quote, offset, None)
        else:
            self._odd ^= _odd_between(self._stream, self._quote, self._at, offset)
        self._at = offset
        return self._odd


def needs_resync(pulled: list[str], quote: str) -> bool:
    """Whether a malformed record (its physical lines as read) falls under the parity rule:
    an odd number of quotes, or more than one line."""
    return len(pulled) > 1 or sum(text.count(quote) for text in pulled) % 2 == 1


def resync(
    stream: BinaryIO, start: Position, parity: QuoteParity, quote: str
) -> tuple[str, Position]:
    """The bad record starting at `start` under the parity rule: its text (its lines,
    without the last line terminator, invalid UTF-8 replaced) and the position of the line
    where reading resumes. Leaves the stream at that position."""
    rest_odd = parity.odd_from(start.offset)
    stream.seek(start.offset)
    quote_bytes = quote.encode()
    offset, line, odd = start.offset, start.line, False
    taken: list[bytes] = []
    for raw in stream:
        taken.append(raw)
        offset += len(raw)
        line += raw.endswith(b"\n")
        odd ^= bool(raw.count(quote_bytes) % 2)
        if odd == rest_odd:
            break
    stream.seek(offset)
    text = b"".join(taken).decode("utf-8", "replace")
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    return text, Position(offset, line)
