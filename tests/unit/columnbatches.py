"""Batches of typed records held both ways for the unit tests of the consumers' column paths
(hypothesis): an unbuilt `dag.Columns` and the same records as a list of dicts. Columns are
an int column (ints near the int64 limits), a text column (empty text, unicode, the CSV and
staging separators) or a column of anything (bools, ints beyond 64 bits, lone surrogates)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from dag import Columns
from dag.limits import INT64_MAX, INT64_MIN
from tests.unit.jsonvalues import VALUES

INTS = st.one_of(
    st.none(),
    st.integers(min_value=INT64_MIN, max_value=INT64_MAX),
    st.sampled_from([INT64_MIN, INT64_MIN + 1, INT64_MAX - 1, INT64_MAX, 0, -1]),
)
TEXTS = st.one_of(
    st.none(),
    st.text(max_size=8),
    st.sampled_from(["", " ", "a,b", 'q"q', "l1\nl2", "\r", "\x1f", "\x1e", "é€😀", "None"]),
)
NAMES = st.lists(
    st.text(min_size=1, max_size=6).filter(lambda n: n.isprintable()), max_size=5, unique=True
)


@st.composite
def batches(draw: Any, min_records: int = 0) -> tuple[list[str], list[list[Any]]]:
    """(names, columns): up to 5 columns of one length, each of ints, texts or anything."""
    names = draw(NAMES)
    n = draw(st.integers(min_value=min_records, max_value=12))
    columns = [draw(st.lists(draw(st.sampled_from([INTS, TEXTS, VALUES])), min_size=n,
                             max_size=n)) for _ in names]  # fmt: skip
    return names, columns


def both(names: list[str], columns: list[list[Any]]) -> tuple[Columns, list[dict[str, Any]]]:
    """The batch as an unbuilt `Columns` and as a list of dicts (keys in `names` order)."""
    records = [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]
    return Columns(names, [list(c) for c in columns]), records


def outcome(fn: Any, *args: Any, **kw: Any) -> tuple[str, Any]:
    """What a call gives: ("ok", its result) or ("error", the exception's type)."""
    try:
        return "ok", fn(*args, **kw)
    except Exception as exc:  # both paths must fail alike
        return "error", type(exc)
