"""`etl token ... --expires-in`: the durations a person types, and the ones refused."""

from __future__ import annotations

import argparse

import pytest

from service.client.tokens import parse_duration_s


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3600", 3600),
        ("3600s", 3600),
        ("90m", 5400),
        ("12h", 43200),
        ("30d", 2592000),
        (" 1d ", 86400),
    ],
)
def test_durations_in_seconds(text: str, seconds: int) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0d", "1w", "1.5h", "-5m", "h", "1 h", "12345678901d"])
def test_other_text_is_refused_naming_the_forms(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="3600s, 90m, 12h or 30d"):
        parse_duration_s(text)
