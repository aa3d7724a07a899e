"""What the JSON written by orjson is held to in the unit tests: the standard encoder with
the documented options, over values of every awkward kind (hypothesis)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

STANDARD = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(),  # any code point, lone surrogates included
    st.text(alphabet=st.characters(max_codepoint=0x7F)),
    st.sampled_from(["\u2028\u2029", "\x7f", "\ud800", 'a"\\/\b\f\n\r\t', "\U0001f600"]),
)
