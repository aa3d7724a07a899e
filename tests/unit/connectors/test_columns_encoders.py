"""The exports' encoders given an unbuilt `dag.Columns` read it by column (the JSONL encoder
builds its dicts for orjson and drops them) and write exactly the bytes they write for the
same records as dicts: the JSONL and CSV files, the table export's record keys, its COPY
lines and its in-commit column texts and JSON (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from connectors import encode_csv, encode_jsonl
from connectors.commit_staging import json_records, split_columns
from connectors.export_encoding import encode_batch, record_keys
from tests.unit.columnbatches import batches, both, outcome


@settings(max_examples=300)
@given(batches())
def test_jsonl_of_columns_is_the_jsonl_of_the_records(batch) -> None:
    by_column, records = both(*batch)
    assert outcome(encode_jsonl, by_column) == outcome(encode_jsonl, records)
    assert not by_column.built


@settings(max_examples=300)
@given(batches(), st.booleans(), st.data())
def test_csv_of_columns_is_the_csv_of_the_records(batch, header, data) -> None:
    names, _ = batch
    by_column, records = both(*batch)
    asked = data.draw(st.lists(st.sampled_from([*names, "missing"]), unique=True))
    got = outcome(encode_csv, by_column, asked, header=header)
    assert got == outcome(encode_csv, records, asked, header=header)
    assert not by_column.built


@settings(max_examples=300)
@given(batches(min_records=1).filter(lambda b: b[0]), st.integers(1, 2**40), st.data())
def test_table_encodings_of_columns_are_those_of_the_records(batch, first, data) -> None:
    names, _ = batch
    by_column, records = both(*batch)
    key = data.draw(st.sampled_from([None, *names]))
    types = {n: data.draw(st.sampled_from(["int", "string", "date"])) for n in names}
    assert record_keys(key, by_column, first) == record_keys(key, records, first)
    encoded = [outcome(encode_batch, names, key, b, first, 3) for b in (by_column, records)]
    assert [_text(e) for e in encoded[0:1]] == [_text(e) for e in encoded[1:2]]
    keys = [str(first + i) for i in range(len(records))]
    assert outcome(split_columns, types, by_column, keys) == outcome(
        split_columns, types, records, keys
    )
    assert json_records(by_column) == json_records(records)
    assert not by_column.built


def test_a_batch_of_one_typed_record_goes_in_the_commit_as_json() -> None:
    """A typed batch that the column texts cannot carry (one record, a separator in a
    value) still goes in the batch's commit: orjson takes no `Columns` itself."""
    from dag import Columns

    one = Columns(["id", "name"], [[1], ["a\x1fb"]])
    assert json_records(one) == '[{"id":1,"name":"a\\u001fb"}]' and not one.built


def _text(result: tuple) -> tuple:
    """An `encode_batch` outcome with its buffer read."""
    kind, value = result
    if kind == "ok" and value is not None:
        return kind, value[0].getvalue(), value[1]
    return result
