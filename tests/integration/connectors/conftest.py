"""Fixtures of the connectors' tests: a second connection to the test database (a
concurrent reader, or another executor)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg2
import pytest


@pytest.fixture
def other(db_url: str) -> Iterator[psycopg2.extensions.connection]:
    """A second connection: a concurrent reader, or another executor."""
    c = psycopg2.connect(db_url)
    yield c
    c.close()
