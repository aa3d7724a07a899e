"""Reading CSV bytes through `dag.csvparts` and looking at what came out."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import settings

from dag.csvparts import read_csv_batches
from dag.records import RawBatch

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
PROPERTY = settings(max_examples=200, deadline=None)


def read(data: bytes, **kwargs) -> list[RawBatch]:
    return list(read_csv_batches(io.BytesIO(data), **kwargs))


def rows_of(batches: list[RawBatch]) -> list[list[str | None]]:
    return [list(r.values.values()) for b in batches for r in b.records]


def lines_of(batches: list[RawBatch]) -> list[int]:
    return [r.line for b in batches for r in b.records]


def errors_of(batches: list[RawBatch]):
    return [e for b in batches for e in b.row_errors]
