"""Reading CSV bytes through `dag.csvparts` and looking at what came out."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st

from dag.csvparts import read_csv_batches
from dag.records import RawBatch

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
PROPERTY = settings(max_examples=200, deadline=None)


def read(data: bytes, **kwargs) -> list[RawBatch]:
    return list(read_csv_batches(io.BytesIO(data), **kwargs))


def rows_of(batches: list[RawBatch]) -> list[list[str | None]]:
    return [list(r.values.values()) for b in batches for r in b.records]


def lines_of(batches: list[RawBatch]) -> list[int]:
    return [r.line for b in batches for r in b.records]


def errors_of(batches: list[RawBatch]):
    return [e for b in batches for e in b.row_errors]


# Files for the block readers (`dag.csvblocks`): a header `a,b,c` and mostly lines they read.
HEADER = ["a", "b", "c"]
_INTS = ["0", "7", "-12", "123456789012345678", "9223372036854775807", "-9223372036854775808"]
_DATES = ["2024-02-29", "0001-01-01", "9999-12-31", "2013-01-01"]
_NULLISH = ["", "NA"]
_OUTLIERS = ["007", "-0", "0x10", "1_000", "+1", "9223372036854775808", "2023-02-29", "0000-01-01",
             "2024-13-01", "x", " 1", "1.5", "é", "2013-01-01T10:00:00Z"]  # fmt: skip
_FAMILIES = {"int": _INTS + _NULLISH, "date": _DATES + _NULLISH, "any": _INTS + _DATES + _OUTLIERS}
_ODD_LINES = st.sampled_from(
    ['"q",1,2', '"a\nb",1,2', "1,2", "1,2,3,4", "", "1\r,2,3", "1,\x00,3", '1,"",2']
)


@st.composite
def mostly_quote_free_files(draw) -> bytes:
    """A header and lines: mostly clean ones, each column's values of one family (ints,
    dates, anything) with a rare outlier, and some odd lines (quotes, line ends in quotes,
    other widths, empty lines, CR, NUL, invalid UTF-8)."""
    families = [_FAMILIES[draw(st.sampled_from(list(_FAMILIES)))] for _ in HEADER]
    lines = []
    for _ in range(draw(st.integers(0, 40))):
        if draw(st.integers(0, 9)) == 0:
            lines.append(draw(_ODD_LINES).encode())
        elif draw(st.integers(0, 19)) == 0:
            lines.append(b"1,\xff,2")
        else:  # now and then a value outside its column's family
            row = [draw(st.sampled_from(f if draw(st.integers(0, 11)) else _OUTLIERS))
                   for f in families]  # fmt: skip
            lines.append(",".join(row).encode())
    body = b"\n".join(lines) + (b"\n" if draw(st.booleans()) else b"")
    return b"a,b,c\n" + body
