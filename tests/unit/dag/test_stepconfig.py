"""The configs of each step type (dag.stepconfig): ingest, transform ops, exports."""

from __future__ import annotations

from typing import Any

import pytest

from dag.plan import (
    INT64_MAX,
    INT64_MIN,
    validate_plan,
)
from tests.unit.dag.plans import (
    DELETE,
    only_error,
    with_config,
    with_step,
    with_transform,
)

# --- ingest config -------------------------------------------------------------------------------

C0 = "plan.steps[0].config"


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"source": DELETE}, f"{C0}.source", "is required"),
        ({"source": "s3"}, f"{C0}.source", "must be one of 'file', 'table'"),
        ({"path": DELETE}, f"{C0}.path", "is required"),
        ({"path": ""}, f"{C0}.path", "must not be empty"),
        ({"path": 5}, f"{C0}.path", "must be a string"),
        ({"path": "/etc/passwd"}, f"{C0}.path", "must be a relative path"),
        ({"path": "\\\\server\\share\\x.csv"}, f"{C0}.path", "must be a relative path"),
        ({"path": "C:\\data\\x.csv"}, f"{C0}.path", "must be a relative path"),
        ({"path": "../secrets.csv"}, f"{C0}.path", "must not contain '..'"),
        ({"path": "a/../../x.csv"}, f"{C0}.path", "must not contain '..'"),
        ({"path": "a\\..\\x.csv"}, f"{C0}.path", "must not contain '..'"),
        ({"path": "data/"}, f"{C0}.path", "must name a file"),
        ({"path": "x\x00.csv"}, f"{C0}.path", "NUL"),
        ({"format": "xml"}, f"{C0}.format", "must be one of 'csv', 'json', 'jsonl'"),
        ({"format": None}, f"{C0}.format", "must be one of"),
        ({"columns": ["id"]}, f"{C0}.columns", "must be an object"),
        ({"columns": {"id": "integer"}}, f"{C0}.columns.id", "type must be one of"),
        ({"columns": {"id": None}}, f"{C0}.columns.id", "type must be one of"),
        ({"columns": {"": "int"}}, f"{C0}.columns.", "non-empty"),
        ({"delimiter": ""}, f"{C0}.delimiter", "single character"),
        ({"delimiter": ";;"}, f"{C0}.delimiter", "single character"),
        ({"delimiter": 44}, f"{C0}.delimiter", "single character"),
        ({"delimiter": '"'}, f"{C0}.delimiter", "cannot be a quote"),
        ({"delimiter": "\n"}, f"{C0}.delimiter", "cannot be a quote"),
        ({"delimiter": "\r"}, f"{C0}.delimiter", "cannot be a quote"),
        ({"format": "json", "delimiter": ";"}, f"{C0}.delimiter", "only applies to the csv"),
        ({"format": "jsonl", "delimiter": ","}, f"{C0}.delimiter", "only applies to the csv"),
        ({"table": "x"}, f"{C0}.table", "unknown key"),
    ],
)
def test_ingest_file_config(changes: dict[str, Any], field: str, fragment: str) -> None:
    only_error(with_config(0, **changes), field, fragment)


@pytest.mark.parametrize(
    "changes",
    [
        {"delimiter": ";"},
        {"delimiter": "\t"},
        {"delimiter": "|"},
        {"format": "json"},
        {"format": "jsonl", "columns": {}},
        {"format": DELETE, "columns": DELETE},
        {"path": "sub/dir/customers.csv"},
        {"path": "./customers.csv"},
        {"path": "a..b.csv"},
        {"columns": {"id": "int", "name": "string", "d": "date", "with space": "string"}},
    ],
)
def test_ingest_file_config_accepted(changes: dict[str, Any]) -> None:
    assert validate_plan(with_config(0, **changes)) == []


@pytest.mark.parametrize(
    ("config", "field", "fragment"),
    [
        ({"source": "table"}, f"{C0}.table", "is required"),
        ({"source": "table", "table": ""}, f"{C0}.table", "must not be empty"),
        ({"source": "table", "table": ["t"]}, f"{C0}.table", "must be a string"),
        ({"source": "table", "table": "t", "path": "x.csv"}, f"{C0}.path", "unknown key"),
        ({"source": "table", "table": "t", "cursor": ""}, f"{C0}.cursor", "must not be empty"),
        ({"source": "table", "table": "t", "cursor": 3}, f"{C0}.cursor", "must be a string"),
        ({"source": "file", "path": "x.csv", "cursor": "c"}, f"{C0}.cursor", "unknown key"),
    ],
)
def test_ingest_table_config(config: dict[str, Any], field: str, fragment: str) -> None:
    only_error(with_step(0, config=config), field, fragment)


def test_ingest_table_config_accepted() -> None:
    assert validate_plan(with_step(0, config={"source": "table", "table": "people"})) == []
    config = {"source": "table", "table": "people", "cursor": "updated_at"}
    assert validate_plan(with_step(0, config=config)) == []


# --- transform config ----------------------------------------------------------------------------

C1 = "plan.steps[1].config"


@pytest.mark.parametrize(
    ("config", "field", "fragment"),
    [
        ({"columns": ["a"]}, f"{C1}.op", "is required"),
        ({"op": "explode"}, f"{C1}.op", "unknown op 'explode'"),
        ({"op": None}, f"{C1}.op", "unknown op None"),
        ({"op": ["trim"]}, f"{C1}.op", "unknown op"),
        # trim / normalize_whitespace
        ({"op": "trim"}, f"{C1}.columns", "is required"),
        ({"op": "trim", "columns": "name"}, f"{C1}.columns", "must be a list"),
        ({"op": "trim", "columns": []}, f"{C1}.columns", "at least one column"),
        ({"op": "trim", "columns": ["a", 3]}, f"{C1}.columns[1]", "non-empty string"),
        ({"op": "trim", "columns": [""]}, f"{C1}.columns[0]", "non-empty string"),
        ({"op": "trim", "columns": ["a", "b", "a"]}, f"{C1}.columns[2]", "duplicate column 'a'"),
        ({"op": "trim", "columns": ["a"], "column": "a"}, f"{C1}.column", "unknown key"),
        ({"op": "normalize_whitespace", "columns": []}, f"{C1}.columns", "at least one"),
        (
            {"op": "normalize_whitespace", "columns": ["x", "x"]},
            f"{C1}.columns[1]",
            "duplicate",
        ),
        # map
        ({"op": "map", "mapping": {}}, f"{C1}.column", "is required"),
        ({"op": "map", "column": "", "mapping": {}}, f"{C1}.column", "must not be empty"),
        ({"op": "map", "column": 1, "mapping": {}}, f"{C1}.column", "must be a string"),
        ({"op": "map", "column": "s"}, f"{C1}.mapping", "is required"),
        ({"op": "map", "column": "s", "mapping": [["A", "B"]]}, f"{C1}.mapping", "object"),
        (
            {"op": "map", "column": "s", "mapping": {"A": True}},
            f"{C1}.mapping.A",
            "must be a string, an integer or null",
        ),
        ({"op": "map", "column": "s", "mapping": {"A": 1.5}}, f"{C1}.mapping.A", "string"),
        ({"op": "map", "column": "s", "mapping": {"A": ["x"]}}, f"{C1}.mapping.A", "string"),
        ({"op": "map", "column": "s", "mapping": {"A": 2**63}}, f"{C1}.mapping.A", "int64"),
        ({"op": "map", "column": "s", "mapping": {}, "into": ""}, f"{C1}.into", "not be empty"),
        ({"op": "map", "column": "s", "mapping": {}, "into": 3}, f"{C1}.into", "be a string"),
        ({"op": "map", "column": "s", "mapping": {}, "default": False}, f"{C1}.default", "null"),
        ({"op": "map", "column": "s", "mapping": {}, "default": {}}, f"{C1}.default", "null"),
        ({"op": "map", "column": "s", "mapping": {}, "columns": ["s"]}, f"{C1}.columns", "unknown"),
        # filter_eq
        ({"op": "filter_eq", "value": 1}, f"{C1}.column", "is required"),
        ({"op": "filter_eq", "column": "s"}, f"{C1}.value", "is required"),
        ({"op": "filter_eq", "column": "s", "value": True}, f"{C1}.value", "integer or null"),
        ({"op": "filter_eq", "column": "s", "value": 1.0}, f"{C1}.value", "integer or null"),
        ({"op": "filter_eq", "column": "s", "value": {"a": 1}}, f"{C1}.value", "integer or null"),
        ({"op": "filter_eq", "column": "s", "value": [1]}, f"{C1}.value", "integer or null"),
        ({"op": "filter_eq", "column": "s", "value": 2**63}, f"{C1}.value", "int64"),
        ({"op": "filter_eq", "column": "s", "value": -(2**63) - 1}, f"{C1}.value", "int64"),
        # parse_date
        ({"op": "parse_date"}, f"{C1}.column", "is required"),
        ({"op": "parse_date", "column": "d", "format": "%Y"}, f"{C1}.format", "unknown key"),
        # aggregate
        ({"op": "aggregate"}, f"{C1}.column", "is required"),
        ({"op": "aggregate", "column": "n", "group_by": "c"}, f"{C1}.group_by", "must be a list"),
        ({"op": "aggregate", "column": "n", "group_by": [1]}, f"{C1}.group_by[0]", "non-empty"),
        (
            {"op": "aggregate", "column": "n", "group_by": ["c", "c"]},
            f"{C1}.group_by[1]",
            "duplicate column 'c'",
        ),
        (
            {"op": "aggregate", "column": "n", "group_by": ["c", "sum"]},
            f"{C1}.group_by[1]",
            "clashes with an aggregate output column",
        ),
        ({"op": "aggregate", "column": "n", "fn": "sum"}, f"{C1}.fn", "unknown key"),
    ],
)
def test_transform_config(config: dict[str, Any], field: str, fragment: str) -> None:
    only_error(with_transform(config), field, fragment)


@pytest.mark.parametrize(
    "config",
    [
        {"op": "trim", "columns": ["a", "b"]},
        {"op": "normalize_whitespace", "columns": ["name"]},
        {"op": "map", "column": "s", "mapping": {}},
        {"op": "map", "column": "s", "mapping": {"A": "x", "B": 1, "C": None}, "into": "t"},
        {"op": "map", "column": "s", "mapping": {"A": "x"}, "default": None},
        {"op": "map", "column": "s", "mapping": {"A": "x"}, "default": 0},
        {"op": "filter_eq", "column": "s", "value": None},
        {"op": "filter_eq", "column": "s", "value": ""},
        {"op": "filter_eq", "column": "s", "value": INT64_MIN},
        {"op": "filter_eq", "column": "s", "value": INT64_MAX},
        {"op": "parse_date", "column": "d"},
        {"op": "aggregate", "column": "n"},
        {"op": "aggregate", "column": "n", "group_by": []},
        {"op": "aggregate", "column": "n", "group_by": ["country", "status"]},
    ],
)
def test_transform_config_accepted(config: dict[str, Any]) -> None:
    assert validate_plan(with_transform(config)) == []


# --- export config -------------------------------------------------------------------------------

C2 = "plan.steps[2].config"
C3 = "plan.steps[3].config"


@pytest.mark.parametrize(
    ("i", "config", "field", "fragment"),
    [
        (3, {"path": "x.jsonl"}, f"{C3}.target", "is required"),
        (3, {"target": "s3", "path": "x"}, f"{C3}.target", "must be one of 'file', 'table'"),
        (3, {"target": "file"}, f"{C3}.path", "is required"),
        (3, {"target": "file", "path": "/tmp/x.jsonl"}, f"{C3}.path", "relative"),
        (3, {"target": "file", "path": "../x.jsonl"}, f"{C3}.path", "'..'"),
        (3, {"target": "file", "path": "out/.."}, f"{C3}.path", "'..'"),
        (3, {"target": "file", "path": ""}, f"{C3}.path", "must not be empty"),
        (3, {"target": "file", "path": "x", "format": "parquet"}, f"{C3}.format", "one of"),
        (3, {"target": "file", "path": "x", "format": "json"}, f"{C3}.format", "one of"),
        (3, {"target": "file", "path": "x", "key": "id"}, f"{C3}.key", "unknown key"),
        (2, {"target": "table"}, f"{C2}.table", "is required"),
        (2, {"target": "table", "table": ""}, f"{C2}.table", "must not be empty"),
        (2, {"target": "table", "table": 1}, f"{C2}.table", "must be a string"),
        (2, {"target": "table", "table": "Customers"}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "1st"}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "a-b"}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "a.b"}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "t\n"}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "a" * 64}, f"{C2}.table", "lowercase"),
        (2, {"target": "table", "table": "t", "key": ""}, f"{C2}.key", "must not be empty"),
        (2, {"target": "table", "table": "t", "key": ["id"]}, f"{C2}.key", "must be a string"),
        (2, {"target": "table", "table": "t", "path": "x"}, f"{C2}.path", "unknown key"),
        (2, {"target": "table", "table": "t", "mode": "merge"}, f"{C2}.key", '"mode": "merge"'),
        (2, {"target": "table", "table": "t", "mode": "upsert"}, f"{C2}.mode", "'merge'"),
        (2, {"target": "table", "table": "t", "mode": None}, f"{C2}.mode", "'append'"),
        (3, {"target": "file", "path": "x", "mode": "merge"}, f"{C3}.mode", "unknown key"),
        (
            2,
            {"target": "table", "table": "t", "key": "id", "deleted": "gone"},
            f"{C2}.deleted",
            '"mode": "merge"',
        ),
        (
            2,
            {"target": "table", "table": "t", "key": "id", "mode": "merge", "deleted": "id"},
            f"{C2}.deleted",
            "not be the key",
        ),
        (
            2,
            {"target": "table", "table": "t", "key": "id", "mode": "merge", "deleted": ""},
            f"{C2}.deleted",
            "must not be empty",
        ),
    ],
)
def test_export_config(i: int, config: dict[str, Any], field: str, fragment: str) -> None:
    only_error(with_step(i, config=config), field, fragment)


@pytest.mark.parametrize(
    ("i", "config"),
    [
        (3, {"target": "file", "path": "x.csv", "format": "csv"}),
        (3, {"target": "file", "path": "nested/x.jsonl"}),
        (2, {"target": "table", "table": "_t0"}),
        (2, {"target": "table", "table": "a" * 63, "key": "id"}),
        (2, {"target": "table", "table": "t", "key": "id", "mode": "merge"}),
        (2, {"target": "table", "table": "t", "key": "id", "mode": "merge", "deleted": "gone"}),
        (2, {"target": "table", "table": "t", "mode": "append"}),
    ],
)
def test_export_config_accepted(i: int, config: dict[str, Any]) -> None:
    assert validate_plan(with_step(i, config=config)) == []


@pytest.mark.parametrize(
    ("null_values", "field", "fragment"),
    [
        ("NA", "plan.steps[0].config.null_values", "must be a list of strings"),
        (["NA", 0], "plan.steps[0].config.null_values[1]", "must be a string"),
        (["NA", "NA"], "plan.steps[0].config.null_values[1]", "listed twice"),
        (["x" * 65], "plan.steps[0].config.null_values[0]", "at most 64 characters"),
        ([str(i) for i in range(33)], "plan.steps[0].config.null_values", "at most 32"),
    ],
)
def test_null_values_rules(null_values, field, fragment) -> None:
    only_error(with_config(0, null_values=null_values), field, fragment)


def test_null_values_accepted() -> None:
    assert validate_plan(with_config(0, null_values=["NA", "N/A", "", "\\N"])) == []
