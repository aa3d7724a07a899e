"""The relative-path rule shared by plan validation, the ingest guard and file exports: a
user-supplied path is relative, names a file, and cannot climb out of its directory on any
platform. Shape only: the connectors still guard the real file system (symlinks, links)."""

from __future__ import annotations

import re

# File system limits (Linux NAME_MAX, and well under PATH_MAX with a directory in front): a
# longer path fails with ENAMETOOLONG on every attempt, so it is refused up front.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 1024

# The rule as a JSON Schema (the OpenAPI document's file ingests and exports): relative, no
# `..` segment, no NUL, not naming a folder; names of at most 255 characters (the byte limit
# is exact for ASCII).
_SEGMENT = r"[^/\\\u0000]{1,255}"
REL_PATH_SCHEMA = {
    "type": "string",
    "maxLength": MAX_PATH_BYTES,
    "pattern": (
        r"^(?![/\\])(?![A-Za-z]:)(?!(.*[/\\])?\.\.([/\\]|$))"
        rf"([^/\\\u0000]{{0,255}}[/\\])*(?!\.$){_SEGMENT}$"
    ),
}

_DRIVE = re.compile(r"[A-Za-z]:")
_SEPARATORS = re.compile(r"[/\\]")


def split_relative_path(value: str) -> list[str]:
    """The segments of `value`, split on `/` and `\\` alike."""
    return _SEPARATORS.split(value)


def relative_path_problem(value: str) -> str | None:
    """Why `value` is not an acceptable relative file path, or None when it is."""
    if not value.strip():
        return "must not be empty"
    if "\x00" in value:
        return "must not contain NUL characters"
    # Backslashes and drive letters count too: the path must not escape on any platform.
    if value.startswith(("/", "\\")) or _DRIVE.match(value):
        return "must be a relative path, not an absolute one"
    segments = split_relative_path(value)
    if ".." in segments:
        return "must not contain '..' segments"
    if segments[-1] in ("", "."):
        return "must name a file, not a directory"
    if _utf8_len(value) > MAX_PATH_BYTES:
        return f"must be at most {MAX_PATH_BYTES} bytes long"
    if any(_utf8_len(segment) > MAX_NAME_BYTES for segment in segments):
        return f"each file or folder name must be at most {MAX_NAME_BYTES} bytes"
    return None


def _utf8_len(text: str) -> int:
    # Lone surrogates cannot be file names either; counting them as 3 bytes is close enough.
    return len(text.encode("utf-8", "surrogatepass"))
