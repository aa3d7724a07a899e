"""The compose drill's memory figures where the host has no cgroup of the containers (Docker
Desktop): `docker stats`' MemUsage column, read in bytes."""

from __future__ import annotations

import pytest

from drills.engine import parse_mem_usage


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        ("123.4MiB / 512MiB", round(123.4 * 2**20)),
        ("1.5GiB / 7.7GiB", round(1.5 * 2**30)),
        ("900KiB / 512MiB", 900 * 2**10),
        ("12B / 1GiB", 12),
        ("45.2MB / 1GB", 45_200_000),
        ("3kB / 1GB", 3000),
    ],
)
def test_mem_usage_in_bytes(column: str, expected: int) -> None:
    assert parse_mem_usage(column) == expected


def test_an_unknown_unit_is_refused() -> None:
    with pytest.raises((KeyError, ValueError)):
        parse_mem_usage("12XB / 1GB")
    with pytest.raises((KeyError, ValueError)):
        parse_mem_usage("12TiB / 1GB")
