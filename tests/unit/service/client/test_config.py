"""The API client's configuration and the list cursors: plain values, no database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from service.config import Config
from service.domain.listing import decode_cursor, encode_cursor, parse_limit, parse_statuses
from service.errors import ValidationFailed


def test_the_api_url_defaults_to_the_bind_address_and_the_token_to_none() -> None:
    cfg = Config.from_env({"ETL_API_BIND": "0.0.0.0:9000"})
    assert (cfg.api_url, cfg.token) == ("http://0.0.0.0:9000", None)
    assert Config.from_env({}).api_url == "http://127.0.0.1:8080"
    given = Config.from_env({"ETL_API_URL": "https://etl.example/", "ETL_TOKEN": "t0k"})
    assert (given.api_url, given.token) == ("https://etl.example/", "t0k")


def test_a_cursor_round_trips_and_is_bound_to_its_list() -> None:
    at, row = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), uuid.uuid4()
    cursor = encode_cursor("runs", at, row)
    assert cursor.isascii() and "=" not in cursor
    assert decode_cursor(cursor, "runs", 2) == [at.isoformat(), str(row)]
    with pytest.raises(ValidationFailed) as exc:
        decode_cursor(cursor, "pipelines", 2)
    assert exc.value.details[0]["field"] == "before"


@pytest.mark.parametrize(("raw", "expected"), [(None, 50), ("1", 1), ("500", 500)])
def test_limits(raw: str | None, expected: int) -> None:
    assert parse_limit(raw) == expected


def test_statuses() -> None:
    assert parse_statuses("failed, running") == ["failed", "running"]
    assert parse_statuses(None) is None
    with pytest.raises(ValidationFailed):
        parse_statuses("failed,nope")
