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
