"""The dialect of a file ingest: `encoding`, `quote` and `on_schema_change` (the
`delimiter` is checked by `dag.stepconfig`), and the error that shows the header as read
when declared columns are not in it.

Shape only: the codec itself is applied by the connectors (`connectors.transcode`), the
quote by the CSV reader (`dag.csvparts`)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from dag.errors import FieldError

__all__ = [
    "DELIMITER_CANDIDATES",
    "ENCODINGS",
    "SCHEMA_CHANGES",
    "missing_columns_message",
    "validate_dialect",
]

ENCODINGS = ("utf-8", "utf-8-sig", "latin-1", "cp1252", "utf-16")
SCHEMA_CHANGES = ("fail", "evolve", "ignore")
DIALECT_KEYS = ("encoding", "quote", "on_schema_change")
# Delimiters a header is tried with when declared columns are missing from it.
DELIMITER_CANDIDATES = (",", ";", "\t", "|")
_HEADER_SHOWN_CHARS = 200


def validate_dialect(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    """Append the problems of a file ingest's `encoding`, `quote` and `on_schema_change`."""
    fmt = config.get("format", "csv")
    if "encoding" in config and config["encoding"] not in ENCODINGS:
        choices = ", ".join(repr(e) for e in ENCODINGS)
        errors.append(FieldError(f"{path}.encoding", f"must be one of {choices}"))
    if "quote" in config:
        quote = config["quote"]
        if fmt != "csv":
            errors.append(FieldError(f"{path}.quote", "only applies to the csv format"))
        elif not isinstance(quote, str) or len(quote) != 1 or not quote.isascii():
            errors.append(FieldError(f"{path}.quote", "must be a single ASCII character"))
        elif quote in ("\r", "\n") or quote == config.get("delimiter", ","):
            errors.append(
                FieldError(f"{path}.quote", "cannot be a carriage return, newline or the delimiter")
            )
    if "on_schema_change" in config and config["on_schema_change"] not in SCHEMA_CHANGES:
        choices = ", ".join(repr(c) for c in SCHEMA_CHANGES)
        errors.append(FieldError(f"{path}.on_schema_change", f"must be one of {choices}"))


def missing_columns_message(
    header: Sequence[str], missing: Sequence[str], delimiter: str | None = None
) -> str:
    """Why the declared columns `missing` are not in the input: the header as read,
    for a CSV file read with `delimiter` another delimiter that would find them all, and
    the name nearest the first missing one (a typo is told what it missed)."""
    names = ", ".join(repr(m) for m in missing)
    shown = repr(list(header))
    if len(shown) > _HEADER_SHOWN_CHARS:
        shown = shown[:_HEADER_SHOWN_CHARS] + "...]"
    noun = "column" if len(missing) == 1 else "columns"
    verb = "is" if len(missing) == 1 else "are"
    message = f"declared {noun} {names} {verb} not in the input; the header read: {shown}"
    if delimiter is not None:
        hint = _other_delimiter(header, missing, delimiter)
        if hint is not None:
            message += f"; with delimiter {hint!r} the header has them"
    near = difflib.get_close_matches(missing[0], header, n=1)
    return message + (f" (did you mean {near[0]!r}?)" if near else "")


def _other_delimiter(header: Sequence[str], missing: Sequence[str], used: str) -> str | None:
    """A delimiter among `DELIMITER_CANDIDATES` that splits the header read with `used`
    into names holding every one of `missing`."""
    line = used.join(header)
    for candidate in DELIMITER_CANDIDATES:
        if candidate == used:
            continue
        names = {name.strip().strip('"') for name in line.split(candidate)}
        if all(m in names for m in missing):
            return candidate
    return None
