"""JSONL export lines: orjson writes what the standard encoder writes (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors import encode_jsonl
from tests.unit.jsonvalues import STANDARD, VALUES


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=3), VALUES, max_size=3), max_size=5))
def test_property_jsonl_lines_are_the_standard_encoders(records):
    """Byte for byte the standard encoder's lines; a lone surrogate is refused as before."""
    try:
        expected = "".join(STANDARD(r) + "\n" for r in records).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: refused as before
        with pytest.raises(UnicodeEncodeError):
            encode_jsonl(records)
        return
    assert encode_jsonl(records) == expected


BRACES = st.text(alphabet='{},[]":a', max_size=8)  # `},{` inside a value, often
NESTED = st.recursive(
    st.one_of(st.none(), st.integers(-3, 3), BRACES),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(BRACES, inner, max_size=2)
    ),
    max_leaves=6,
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.dictionaries(BRACES, NESTED, max_size=3), max_size=6))
def test_property_a_batch_encoded_at_once_splits_into_the_standard_encoders_lines(records):
    """The batch is encoded in one call and split at its `},{`; texts and nested objects
    holding `},{` themselves, and empty records, still give exactly one line a record."""
    expected = "".join(STANDARD(r) + "\n" for r in records).encode("utf-8")
    assert encode_jsonl(records) == expected


def test_a_text_holding_a_record_boundary_stays_in_its_line() -> None:
    records = [{"a": "},{"}, {}, {"b": [{"c": 1}, {"c": 2}]}, {"a": "x"}]
    assert encode_jsonl(records).split(b"\n") == [
        b'{"a":"},{"}',
        b"{}",
        b'{"b":[{"c":1},{"c":2}]}',
        b'{"a":"x"}',
        b"",
    ]
