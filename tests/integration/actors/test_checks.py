"""Data checks on real processes: counted over every batch of a step's output (a `unique`
key repeated 700 records apart, in another batch), kept with the step, and a failed
`error` check fails the step as an input-data error with nothing of it or downstream
published."""

from __future__ import annotations

import html
import http.cookiejar
import json
import re
import urllib.parse
import urllib.request

import pytest

from drills import Stack
from drills.harness import ADMIN_TOKEN


def _orders(n: int, *, repeat: tuple[int, int] | None = None, bad: tuple[int, ...] = ()) -> str:
    """`n` orders; `repeat` (i, j): order j gets order i's id; `bad`: rows with an amount
    that is not an int (rejected in reject mode)."""
    lines = ["id,amount,status"]
    for i in range(1, n + 1):
        oid = repeat[0] if repeat and i == repeat[1] else i
        amount = "x" if i in bad else str(i % 50 - 5)
        lines.append(f"{oid},{amount},{'open' if i % 3 else 'closed'}")
    return "\n".join(lines) + "\n"


def _plan(path: str, checks: list[dict], export_checks: list[dict] | None = None) -> dict:
    return {
        "on_row_error": "reject",
        "steps": [
            {"name": "read", "type": "ingest", "checks": checks,
             "config": {"source": "file", "path": path, "columns": {"amount": "int"}}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "checks": export_checks or [],
             "config": {"target": "file", "path": f"{path}.jsonl"}},
        ],
    }  # fmt: skip


CHECKS = [
    {"check": "unique", "columns": ["id"]},
    {"check": "not_null", "columns": ["id", "status"]},
    {"check": "accepted_values", "column": "status", "values": ["open", "closed"]},
    {"check": "range", "column": "amount", "min": 0, "severity": "warn"},
    {"check": "row_count", "min": 1000},
]


def _step(run: dict, name: str) -> dict:
    return next(s for s in run["steps"] if s["name"] == name)


@pytest.mark.parametrize(
    "stack", [{}, {"ETL_FUSION": "0"}], indirect=True, ids=["fused", "unfused"]
)
def test_checks_pass_warn_and_fail_over_the_whole_output(stack: Stack) -> None:
    n = 1500
    (stack.data / "good.csv").write_text(_orders(n))
    (stack.data / "dup.csv").write_text(_orders(n, repeat=(17, 717)))
    (stack.data / "bad.csv").write_text(_orders(n, bad=tuple(range(1, 301))))
    stack.start()
    ratio = [{"check": "max_reject_ratio", "ratio": 0.1}]
    runs = {}
    for name, checks in (("good", CHECKS), ("dup", CHECKS), ("bad", ratio)):
        pid = stack.create(name, _plan(f"{name}.csv", checks, [{"check": "row_count", "max": n}]))
        runs[name] = stack.trigger(pid)[1]["id"]
    good, dup, bad = (stack.wait_run(runs[k]) for k in ("good", "dup", "bad"))

    # Every check holds but the warning: the run succeeds, the export is published.
    assert good["status"] == "succeeded", json.dumps(good, indent=1)
    outcomes = [(c["check"], c["outcome"]) for c in _step(good, "read")["checks"]]
    assert outcomes == [
        ("unique", "passed"), ("not_null", "passed"), ("accepted_values", "passed"),
        ("range", "warned"), ("row_count", "passed"),
    ]  # fmt: skip
    negative = sum(1 for i in range(1, n + 1) if i % 50 - 5 < 0)
    warned = _step(good, "read")["checks"][3]
    assert warned["failing"] == negative
    shown = [(e["record"], e["line"], e["value"]) for e in warned["examples"][:2]]
    assert shown == [(1, 2, -4), (2, 3, -3)]  # the header is line 1
    assert warned["examples"][0]["values"] == {"id": 1, "amount": -4, "status": "open"}
    assert _step(good, "out")["checks"][0]["outcome"] == "passed"
    assert (stack.exports / good["id"] / "good.csv.jsonl").read_text().count("\n") == n

    # A key repeated in another batch fails `read`; nothing of it or downstream published.
    assert dup["status"] == "failed"
    read = _step(dup, "read")
    assert read["status"] == "failed" and len(read["attempts"]) == 1  # not retried
    assert read["attempts"][0]["outcome"] == "input_error"
    unique = read["checks"][0]
    assert (unique["outcome"], unique["failing"]) == ("failed", 1)
    assert unique["examples"] == [{"key": [17], "records": 2, "first_record": 17, "first_line": 18}]
    assert 'check {"check": "unique", "columns": ["id"]} failed' in read["error"]
    assert _step(dup, "out")["status"] != "succeeded"
    assert not (stack.exports / dup["id"]).exists()

    # 300 of 1500 input records rejected: over the 10 % the check allows.
    assert bad["status"] == "failed"
    check = _step(bad, "read")["checks"][0]
    assert (check["outcome"], check["failing"], check["examples"]) == ("failed", 300, [0.2])
    assert not (stack.rejects / bad["id"]).exists()


def _console_page(stack: Stack, path: str) -> str:
    """A console page as a signed-in admin sees it from the stack's own server."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    base = f"http://127.0.0.1:{stack.port}"
    login = opener.open(f"{base}/ui/login").read().decode()
    csrf = re.search(r'name="csrf" value="([^"]*)"', login).group(1)
    form = urllib.parse.urlencode({"token": ADMIN_TOKEN, "csrf": csrf}).encode()
    opener.open(f"{base}/ui/login", form).read()
    return opener.open(f"{base}{path}").read().decode()


def test_examples_of_a_glob_ingest_name_the_file_of_their_line(stack: Stack) -> None:
    """Three files under `daily/*.csv`: a status not accepted on line 2 of the third, a key
    of the second file's line 3 repeated in the third. Each example names its file (as the
    data directory holds it) with its line: in the API, `etl runs show` and the console."""
    days = {
        "daily/2024-01-01.csv": "id,status\n1,open\n2,open\n",
        "daily/2024-01-02.csv": "id,status\n3,open\n4,closed\n5,open\n",
        "daily/2024-01-03.csv": "id,status\n6,lost\n4,open\n",
    }
    (stack.data / "daily").mkdir()
    for path, text in days.items():
        (stack.data / path).write_text(text)
    checks = [
        {"check": "accepted_values", "column": "status", "values": ["open", "closed"],
         "severity": "warn"},
        {"check": "unique", "columns": ["id"]},
    ]  # fmt: skip
    plan = _plan("daily/*.csv", checks)
    plan["steps"][0]["config"]["columns"] = {"id": "int"}
    plan["steps"][1]["config"]["path"] = "daily.jsonl"
    stack.start()
    run_id = stack.trigger(stack.create("daily", plan))[1]["id"]
    run = stack.wait_run(run_id)

    assert run["status"] == "failed", json.dumps(run, indent=1)
    accepted, unique = _step(run, "read")["checks"]
    assert accepted["examples"] == [{
        "record": 6, "file": "daily/2024-01-03.csv", "line": 2, "value": "lost",
        "values": {"id": 6, "status": "lost"},
    }]  # fmt: skip
    assert unique["examples"] == [{
        "key": [4], "records": 2, "first_record": 4, "first_file": "daily/2024-01-02.csv",
        "first_line": 3,
    }]  # fmt: skip
    assert '"first_file": "daily/2024-01-02.csv"' in _step(run, "read")["error"]

    shown = stack.etl("runs", "show", run_id)
    (accepted_row,) = [ln for ln in shown.splitlines() if ln.startswith("read  accepted")]
    assert 'daily/2024-01-03.csv:2 {"value": "lost", "record": 6' in accepted_row
    assert 'daily/2024-01-02.csv:3 {"key": [4], "records": 2, "first_record": 4}' in shown
    page = html.unescape(_console_page(stack, f"/ui/runs/{run_id}"))
    assert '"file": "daily/2024-01-03.csv", "line": 2' in page
    assert '"first_file": "daily/2024-01-02.csv", "first_line": 3' in page


@pytest.mark.parametrize(
    "stack", [{}, {"ETL_FUSION": "0"}], indirect=True, ids=["fused", "unfused"]
)
def test_a_failed_check_publishes_nothing_into_a_downstream_table(stack: Stack) -> None:
    """A table export downstream of a step whose `unique` check fails (a key of the first
    batch repeated in the third, after two batches were staged for the table): the table
    keeps the rows of the last good run, not one row more or changed."""
    n = 1200
    (stack.data / "orders.csv").write_text(_orders(n))
    stack.start()
    plan = _plan("orders.csv", [{"check": "unique", "columns": ["id"]}])
    plan["steps"][1]["config"] = {"target": "table", "table": "orders_checked", "key": "id"}
    pid = stack.create("orders", plan)
    good = stack.wait_run(stack.trigger(pid, "good")[1]["id"])
    assert good["status"] == "succeeded", json.dumps(good, indent=1)
    table = "SELECT count(*), sum(amount), max(status) FROM sandbox.orders_checked"
    before = stack.sql(table)
    assert before[0][0] == n

    changed = _orders(n + 300, repeat=(3, n + 250)).replace(",open\n", ",reopened\n")
    (stack.data / "orders.csv").write_text(changed)
    bad = stack.wait_run(stack.trigger(pid, "bad")[1]["id"])
    assert bad["status"] == "failed"
    read, out = _step(bad, "read"), _step(bad, "out")
    assert read["attempts"][0]["outcome"] == "input_error" and len(read["attempts"]) == 1
    assert read["checks"][0]["examples"][0]["key"] == [3]
    assert out["status"] == "upstream_failed"
    assert stack.sql(table) == before
