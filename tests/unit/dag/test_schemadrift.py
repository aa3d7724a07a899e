"""Schema drift of a file ingest (dag.schemadrift)."""

from __future__ import annotations

from dag.schemadrift import change_message, column_change, schema_mode


def test_added_and_removed_columns_in_order() -> None:
    assert column_change(["id", "name", "fax"], ["name", "id", "email", "phone"]) == {
        "added": ["email", "phone"],
        "removed": ["fax"],
    }


def test_no_change_or_nothing_to_compare_with() -> None:
    assert column_change(["a", "b"], ["b", "a"]) is None
    assert column_change(None, ["a"]) is None


def test_the_default_is_fail_for_a_declared_contract_else_ignore() -> None:
    assert schema_mode({"columns": {"id": "int"}}) == "fail"
    assert schema_mode({"columns": {}}) == "ignore"
    assert schema_mode({}) == "ignore"
    assert schema_mode({"columns": {"id": "int"}, "on_schema_change": "evolve"}) == "evolve"


def test_the_message_names_both_sides_and_the_run() -> None:
    message = change_message({"added": ["email"], "removed": ["fax"]}, "r-1")
    assert message.startswith("the input's columns changed since run r-1: added 'email'; ")
    assert "removed 'fax'" in message
