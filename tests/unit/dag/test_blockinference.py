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
from tests.unit.dag.csvfiles import HEADER, mostly_quote_free_files

NULLS = ("NA",)


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
@given(mostly_quote_free_files(), st.integers(1, 80))
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
