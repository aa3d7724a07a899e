"""A preview bounded in bytes as well as in records: a record or a row error may hold a value
of tens of MiB (one field of a 50 MiB file), and a plan may have 30 steps of 1,000 columns.

- The answer cuts long values (with a marker that gives the full length) and, when that is
  not enough, shows fewer sample rows and row errors, until its JSON fits
  `MAX_ANSWER_BYTES`. It says what it cut (`truncated`); the counters are never cut.
- What a preview holds for the steps still to come is estimated by `held_bytes`, which the
  previewer (`actors.preview`) holds against its budget.
- What it keeps to show (samples, row errors, the rows of an export) holds no long value:
  `kept` replaces each by a `Cut`, its first `MAX_VALUE_CHARS` characters and its length,
  which `clip` cuts as it would the whole value. So 30 steps that each changed a 40 MiB
  value keep 30 x 200 characters to show, not 30 x 40 MiB."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_ANSWER_BYTES = 4 * 1024 * 1024  # of the JSON answer
MAX_VALUE_CHARS = 200  # of one shown value, at the first level


@dataclass(frozen=True)
class Level:
    """How much of each step an answer shows: characters per value, sample (and export)
    rows, row errors."""

    value_chars: int
    rows: int
    row_errors: int


def levels(sample_rows: int, max_row_errors: int) -> tuple[Level, ...]:
    """The levels an answer tries, most shown first; the last shows counters only."""
    return (
        Level(MAX_VALUE_CHARS, sample_rows, max_row_errors),
        Level(64, min(sample_rows, 3), min(max_row_errors, 20)),
        Level(16, 1, 5),
        Level(16, 0, 0),
    )


def bounded(build: Callable[[Level], dict[str, Any]], tried: tuple[Level, ...]) -> dict[str, Any]:
    """The first answer `build(level)` whose JSON fits `MAX_ANSWER_BYTES` (the last level
    otherwise), with `truncated` saying which level it is (null when nothing was cut)."""
    answer: dict[str, Any] = {}
    for i, level in enumerate(tried):
        answer = build(level)
        cut = clip_count(answer) > 0 or i > 0
        answer["truncated"] = (
            {
                "value_chars": level.value_chars,
                "sample_rows": level.rows,
                "row_errors": level.row_errors,
                "answer_bytes_max": MAX_ANSWER_BYTES,
            }
            if cut
            else None
        )
        if len(json.dumps(answer, default=str).encode()) <= MAX_ANSWER_BYTES:
            break
    return answer


class Cut(str):
    """A value longer than `MAX_VALUE_CHARS` as a preview keeps it to show: its first
    `MAX_VALUE_CHARS` characters (the string itself) and its whole length (`chars`)."""

    chars: int

    def __new__(cls, value: str) -> Cut:
        cut = super().__new__(cls, value[:MAX_VALUE_CHARS])
        cut.chars = len(value)
        return cut


def kept(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with each string longer than `MAX_VALUE_CHARS` replaced by its `Cut`
    (`record` itself when it has none)."""
    if not any(isinstance(v, str) and len(v) > MAX_VALUE_CHARS for v in record.values()):
        return record
    return {
        k: Cut(v) if isinstance(v, str) and len(v) > MAX_VALUE_CHARS else v
        for k, v in record.items()
    }


def clip(value: Any, chars: int) -> Any:
    """`value` with every string longer than `chars` cut to `chars` and a marker giving its
    full length (`"abc… [truncated: 52428800 chars]"`), through lists and dicts; a `Cut` is
    cut with the length of the value it stands for."""
    if isinstance(value, str):
        full = value.chars if isinstance(value, Cut) else len(value)
        if full <= chars:
            return value
        return f"{value[:chars]}{_MARK}{full} chars]"
    if isinstance(value, dict):
        return {k: clip(v, chars) for k, v in value.items()}
    if isinstance(value, list):
        return [clip(v, chars) for v in value]
    return value


def clip_count(answer: Any) -> int:
    """How many values of an answer carry the truncation marker."""
    if isinstance(answer, str):
        return int(_MARK in answer)
    if isinstance(answer, dict):
        return sum(clip_count(v) for v in answer.values())
    if isinstance(answer, list):
        return sum(clip_count(v) for v in answer)
    return 0


_MARK = "\u2026 [truncated: "


def held_bytes(records: list[dict], shared: set[int]) -> int:
    """An estimate of the memory `records` hold: a record's dict and, per value, its slot
    and object (a string's characters too). A long string already counted (one a step
    passed on unchanged, its id in `shared`) is not counted again; new ones join `shared`."""
    size = 0
    for r in records:
        size += _RECORD_BYTES
        for v in r.values():
            if isinstance(v, str) and len(v) >= _SHARED_CHARS:
                if id(v) in shared:
                    size += _VALUE_BYTES
                    continue
                shared.add(id(v))
            size += _VALUE_BYTES + (len(v) if isinstance(v, str) else 0)
    return size


# CPython's costs, roughly: a dict and its table per record, a slot and a small object per
# value; long strings are shared between steps that pass them on (a trim of a trimmed value).
_RECORD_BYTES, _VALUE_BYTES, _SHARED_CHARS = 240, 80, 4096
