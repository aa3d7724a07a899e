"""An ingest file in another encoding than UTF-8, decoded by its codec into a UTF-8 copy.

The readers of `dag` read UTF-8 bytes. A file declared `latin-1`, `cp1252` or `utf-16` is
decoded chunk by chunk with Python's incremental decoder and written, as UTF-8, to an
anonymous temporary file that the readers then read like the original: line breaks are the
same characters in both, so line numbers (of records and row errors) are the original
file's, while byte offsets (the checkpoint's positions, the input digest) are the copy's.
The copy is made again on every attempt, byte for byte the same, so a resumed attempt
reads from its checkpoint exactly what it would have read straight through. A byte the
codec cannot decode fails the step (`SourceUndecodable`) with its byte offset in the
original file. `utf-8` and `utf-8-sig` need no copy: the readers decode UTF-8 themselves
(an invalid sequence is a row error) and skip a BOM."""

from __future__ import annotations

import codecs
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from connectors.errors import SourceUndecodable

__all__ = ["decoded_source"]

_CHUNK_BYTES = 1 << 20
_READ_AS_IS = ("utf-8", "utf-8-sig")


@contextmanager
def decoded_source(stream: BinaryIO, encoding: str, *, name: str = "") -> Iterator[BinaryIO]:
    """`stream` itself for UTF-8, else a seekable UTF-8 copy of it (at offset 0), removed
    on exit. Raises `SourceUndecodable` naming the offset of the first undecodable byte."""
    if codecs.lookup(encoding).name in _READ_AS_IS:
        yield stream
        return
    with tempfile.TemporaryFile(prefix="etl-decoded-") as copy:
        _transcode(stream, copy, encoding, name)
        copy.seek(0)
        yield copy


def _transcode(source: BinaryIO, target: BinaryIO, encoding: str, name: str) -> None:
    """Decode all of `source` with `encoding` into `target` as UTF-8."""
    decoder = codecs.getincrementaldecoder(encoding)("strict")
    source.seek(0)
    consumed = 0
    while True:
        chunk = source.read(_CHUNK_BYTES)
        final = not chunk
        pending = len(decoder.getstate()[0])
        try:
            text = decoder.decode(chunk, final=final)
        except UnicodeDecodeError as exc:
            offset = consumed - pending + exc.start
            raise SourceUndecodable(
                f"{name or 'the source'} is not valid {encoding}: {exc.reason} at byte "
                f"offset {offset} (0x{exc.object[exc.start]:02x})"
            ) from None
        target.write(text.encode("utf-8"))
        consumed += len(chunk)
        if final:
            return
