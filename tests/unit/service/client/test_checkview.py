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
