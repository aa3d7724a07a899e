"""`etl runs show`'s check table (service.client.checkview)."""

from __future__ import annotations

from service.client.checkview import check_rows


def test_each_result_is_a_row_under_its_step() -> None:
    run = {
        "steps": [
            {"name": "read", "checks": [
                {"check": "unique", "columns": ["id"], "severity": "error",
                 "outcome": "failed", "failing": 1, "message": "1 record(s) repeat a key of id"},
                {"check": "range", "column": "amount", "min": 0, "severity": "warn",
                 "outcome": "warned", "failing": 3, "message": "3 value(s) ...",
                 "examples": [{"record": 7, "line": 8, "value": -2,
                               "values": {"id": 7, "amount": -2, "note": "x" * 80}}]},
            ]},
            {"name": "out", "checks": []},
            {"name": "pending"},
        ]
    }  # fmt: skip
    assert check_rows(run) == [
        ["read", "unique(id)", "failed", 1, "1 record(s) repeat a key of id", ""],
        ["read", "range(amount; min 0) [warn]", "warned", 3, "3 value(s) ...",
         '{"record": 7, "line": 8, "value": -2, "values": {"id": 7, "amount": -2, "note":…'],
    ]  # fmt: skip
    assert check_rows({"steps": [{"name": "x"}]}) == []


def test_an_example_from_a_glob_ingest_starts_with_its_file_and_line() -> None:
    file = "daily/2024-01-02.csv"
    results = [
        {"check": "unique", "columns": ["id"], "outcome": "failed", "failing": 1, "message": "m",
         "examples": [{"key": [4], "records": 2, "first_record": 4, "first_file": file,
                       "first_line": 3}]},
        {"check": "not_null", "columns": ["id"], "outcome": "warned", "failing": 1,
         "message": "m", "examples": [{"record": 6, "file": file, "line": 2, "null": ["id"],
                                       "values": {"id": None, "note": "x" * 80}}]},
    ]  # fmt: skip
    unique, not_null = (
        row[-1] for row in check_rows({"steps": [{"name": "read", "checks": results}]})
    )
    assert unique == f'{file}:3 {{"key": [4], "records": 2, "first_record": 4}}'
    assert not_null.startswith(f'{file}:2 {{"record": 6, "null": ["id"], "values": {{"id"')
    assert len(not_null) == 80 and not_null.endswith("…")
