"""Inference over blocks of a CSV file (dag.blockinference): on any file, the types and the
evidence are those of the batch pass (`ColumnInference.observe` over every batch), whichever
blocks pyarrow reads and whichever the batch reader takes back."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from dag.blockinference import infer_blocks
from dag.csvparts import read_csv_batches
from dag.inference import ColumnInference
from dag.records import Position
from dag.types import null_out

HEADER = ["a", "b", "c"]
NULLS = ("NA",)
_INTS = ["0", "7", "-12", "123456789012345678", "9223372036854775807", "-9223372036854775808"]
_DATES = ["2024-02-29", "0001-01-01", "9999-12-31", "2013-01-01"]
_NULLISH = ["", "NA"]
_OUTLIERS = ["007", "-0", "+1", "9223372036854775808", "2023-02-29", "0000-01-01",
             "2024-13-01", "x", " 1", "1.5", "é", "2013-01-01T10:00:00Z"]  # fmt: skip
_FAMILIES = {"int": _INTS + _NULLISH, "date": _DATES + _NULLISH, "any": _INTS + _DATES + _OUTLIERS}
_ODD_LINES = st.sampled_from(
    ['"q",1,2', '"a\nb",1,2', "1,2", "1,2,3,4", "", "1\r,2,3", "1,\x00,3", '1,"",2']
)


@st.composite
def csv_files(draw) -> bytes:
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
            row = [draw(st.sampled_from(f if draw(st.integers(0, 29)) else _OUTLIERS))
                   for f in families]  # fmt: skip
            lines.append(",".join(row).encode())
    body = b"\n".join(lines) + (b"\n" if draw(st.booleans()) else b"")
    return b"a,b,c\n" + body


def _batches(stream, start: Position | None = None):
    for raw in read_csv_batches(stream, batch_size=3, start=start):
        null_out(raw.records, NULLS)
        yield raw


def _batch_pass(data: bytes) -> tuple[dict, dict]:
    inference = ColumnInference(HEADER)
    for raw in _batches(io.BytesIO(data)):
        inference.observe(raw.records)
    return inference.columns(), inference.evidence()


def _block_pass(data: bytes, block_bytes: int) -> tuple[dict, dict]:
    stream = io.BytesIO(data)
    inference = ColumnInference(HEADER)
    first = next(_batches(stream))
    inference.observe(first.records)
    infer_blocks(
        stream,
        inference,
        first.end,
        delimiter=",",
        nulls=NULLS,
        batches=lambda position: _batches(stream, position),
        block_bytes=block_bytes,
    )
    return inference.columns(), inference.evidence()


@settings(max_examples=400, deadline=None)
@given(csv_files(), st.integers(1, 80))
def test_blocks_give_the_types_and_evidence_of_the_batch_pass(data: bytes, block: int) -> None:
    assert _block_pass(data, block) == _batch_pass(data)


def test_clean_blocks_are_counted_and_a_late_value_still_rules_a_type_out() -> None:
    lines = [f"{i},2024-01-{1 + i % 28:02d},NA" for i in range(2000)] + ["5,2023-02-29,x"]
    data = ("a,b,c\n" + "\n".join(lines) + "\n").encode()
    columns, evidence = _block_pass(data, 256)
    assert (columns, evidence) == _batch_pass(data)
    assert columns == {"a": "int", "b": "string", "c": "string"}
    assert evidence["a"] == "int: all 2,001 value(s) are int64"
    assert evidence["b"] == (
        "string: '2024-01-01' at line 2 is not an int64, '2023-02-29' at line 2002 is not an"
        " ISO date"
    )
    assert evidence["c"] == "string: 'x' at line 2002 is neither an int64 nor a date"
