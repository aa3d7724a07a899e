"""A file ingest's dialect (dag.dialect): encoding, quote, on_schema_change, and the error
that shows the header as read."""

from __future__ import annotations

from typing import Any

import pytest

from dag.errors import ConfigValueError
from dag.inference import ColumnInference
from dag.plan import validate_plan
from tests.unit.dag.plans import only_error, with_config

C0 = "plan.steps[0].config"


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"encoding": "ebcdic"}, f"{C0}.encoding", "must be one of 'utf-8', 'utf-8-sig'"),
        ({"encoding": ["utf-8"]}, f"{C0}.encoding", "must be one of"),
        ({"quote": ""}, f"{C0}.quote", "single ASCII character"),
        ({"quote": "''"}, f"{C0}.quote", "single ASCII character"),
        ({"quote": "\u00ab"}, f"{C0}.quote", "single ASCII character"),
        ({"quote": ","}, f"{C0}.quote", "the delimiter"),
        ({"quote": ";", "delimiter": ";"}, f"{C0}.quote", "the delimiter"),
        ({"quote": "\n"}, f"{C0}.quote", "newline"),
        ({"format": "jsonl", "quote": "'"}, f"{C0}.quote", "only applies to the csv"),
        ({"on_schema_change": "drop"}, f"{C0}.on_schema_change", "'fail', 'evolve', 'ignore'"),
    ],
)
def test_dialect_errors_have_field_paths(changes: dict[str, Any], field: str, fragment: str):
    only_error(with_config(0, **changes), field, fragment)


@pytest.mark.parametrize(
    "changes",
    [
        {"encoding": "utf-8"},
        {"encoding": "utf-8-sig"},
        {"encoding": "latin-1"},
        {"encoding": "cp1252", "delimiter": ";"},
        {"encoding": "utf-16"},
        {"format": "jsonl", "encoding": "utf-16"},
        {"quote": "'"},
        {"on_schema_change": "fail"},
        {"on_schema_change": "evolve"},
        {"format": "json", "on_schema_change": "ignore"},
    ],
)
def test_dialect_accepted(changes: dict[str, Any]) -> None:
    assert validate_plan(with_config(0, **changes)) == []


def test_a_missing_declared_column_shows_the_header_and_the_delimiter_that_fits():
    with pytest.raises(ConfigValueError) as caught:
        ColumnInference(["id;name;amount"], {"id": "int", "amount": "int"}, ",")
    message = str(caught.value)
    assert "declared columns 'id', 'amount' are not in the input" in message
    assert "the header read: ['id;name;amount']" in message
    assert "with delimiter ';' the header has them" in message


def test_no_delimiter_is_suggested_when_none_fits():
    with pytest.raises(ConfigValueError) as caught:
        ColumnInference(["a", "b"], {"id": "int"}, ",")
    assert str(caught.value).endswith("the header read: ['a', 'b']")


def test_a_tab_file_read_with_commas_is_told_so():
    with pytest.raises(ConfigValueError, match=r"with delimiter '\\t'"):
        ColumnInference(["id\tname"], {"name": "string"}, ",")
