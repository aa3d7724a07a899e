"""What a preview proposes for a file ingest's dialect: the encoding and the CSV delimiter
detected in the first bytes of its input, when they differ from the declared ones (or the
defaults, `utf-8` and `,`). Plain bytes in, a plain answer out; the preview
(`actors.preview`) reads the bytes.

Encoding, from the head (`HEAD_BYTES`) of the file:

- a byte order mark says it: `utf-8-sig` (EF BB BF), `utf-16` (FF FE or FE FF);
- else bytes that are valid UTF-8 are `utf-8` (a sequence cut at the end of the head
  counts as valid);
- else a single-byte encoding: `cp1252` (what spreadsheets and Windows systems write),
  unless a byte that cp1252 leaves undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D) is there, then
  `latin-1`.

It is proposed only when the declared encoding would read the head differently: a head
of ASCII only reads the same in all but `utf-16`, and `utf-8` and `utf-8-sig` read alike
(the readers skip a BOM).

Delimiter (csv only): each of `DELIMITER_CANDIDATES` splits the first complete lines of
the head (at most `SNIFF_LINES`, quotes honoured) into fields; a candidate that gives every
line the same number of fields, more than one, wins, the one with the most fields first
and the declared one on a tie. It is proposed when it is not the declared one."""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Mapping
from typing import Any

from dag.dialect import DELIMITER_CANDIDATES

__all__ = ["HEAD_BYTES", "propose_dialect"]

HEAD_BYTES = 64 * 1024
SNIFF_LINES = 20
_CP1252_UNDEFINED = frozenset(b"\x81\x8d\x8f\x90\x9d")
_UTF8 = ("utf-8", "utf-8-sig")


def detect_encoding(head: bytes) -> str:
    """The encoding the head looks written in (see the module)."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    try:
        codecs.getincrementaldecoder("utf-8")("strict").decode(head, final=False)
        return "utf-8"
    except UnicodeDecodeError:
        pass
    return "latin-1" if _CP1252_UNDEFINED.intersection(head) else "cp1252"


def _reads_alike(head: bytes, declared: str, detected: str) -> bool:
    a, b = codecs.lookup(declared).name, codecs.lookup(detected).name
    if a == b or (a in _UTF8 and b in _UTF8):
        return True
    return head.isascii() and "utf-16" not in (a, b)


def detect_delimiter(text: str, declared: str, quote: str = '"') -> str | None:
    """The delimiter the first lines of `text` look split by (None: no candidate gives
    them all the same number of fields, more than one)."""
    lines = text.splitlines(keepends=True)
    if len(lines) > 1:
        lines = lines[:-1]  # the last line of a head may be cut
    sample = "".join(lines[:SNIFF_LINES])
    best: tuple[int, int, str] | None = None
    for candidate in DELIMITER_CANDIDATES:
        if candidate == quote:
            continue
        try:
            rows = list(csv.reader(io.StringIO(sample), delimiter=candidate, quotechar=quote))
        except csv.Error:
            continue
        widths = {len(r) for r in rows if r}
        if len(widths) != 1 or (width := widths.pop()) < 2:
            continue
        score = (width, candidate == declared, candidate)
        if best is None or score[:2] > best[:2]:
            best = score
    return None if best is None else best[2]


def propose_dialect(head: bytes, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """`{"encoding"?, "delimiter"?, "declared": {...}, "message"}` for a file ingest whose
    head suggests another encoding or delimiter than `config` declares; None otherwise."""
    declared_encoding = config.get("encoding", "utf-8")
    declared_delimiter = config.get("delimiter", ",")
    proposed: dict[str, Any] = {}
    encoding = detect_encoding(head)
    if not _reads_alike(head, declared_encoding, encoding):
        proposed["encoding"] = encoding
    if config.get("format", "csv") == "csv":
        text = head.decode(proposed.get("encoding", declared_encoding), errors="replace")
        delimiter = detect_delimiter(text, declared_delimiter, config.get("quote", '"'))
        if delimiter is not None and delimiter != declared_delimiter:
            proposed["delimiter"] = delimiter
    if not proposed:
        return None
    declared = {"encoding": declared_encoding}
    if config.get("format", "csv") == "csv":
        declared["delimiter"] = declared_delimiter
    said = ", ".join(f"{k} {v!r} (declared {declared[k]!r})" for k, v in proposed.items())
    return {**proposed, "declared": declared, "message": f"the input looks like {said}"}
