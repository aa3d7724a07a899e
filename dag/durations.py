"""Durations for people, written the same way by the console's pages and the `etl` client:
`4.2 s`, `3 min 04 s`, `2 h 05 min`; a thing still going is "running for" its age so far."""

from __future__ import annotations

from datetime import datetime

DASH = "\u2014"


def seconds_text(seconds: float) -> str:
    """A duration for people: `4.2 s`, `3 min 04 s`, `2 h 05 min`."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def elapsed_s(start: datetime | None, end: datetime | None, now: datetime) -> float | None:
    """Seconds from `start` to `end`, or to `now` while there is no end (never below 0: the
    two may come from clocks a little apart); None when it never started."""
    if start is None:
        return None
    return max(((end or now) - start).total_seconds(), 0.0)


def duration_text(start: datetime | None, end: datetime | None, now: datetime) -> str:
    """How long something took (`start` to `end`), or "running for" how long until `now`
    while it has no end; a dash when it never started."""
    seconds = elapsed_s(start, end, now)
    if seconds is None:
        return DASH
    return seconds_text(seconds) if end is not None else f"running for {seconds_text(seconds)}"
