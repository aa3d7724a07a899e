"""A CSV ingest's batches a block at a time (`FileSource._block_batches`, `dag.block_batches`):
on any file, whatever blocks pyarrow reads and whichever the batch reader takes back, the
same batches as the batch reader and `type_records` give (records, row errors, sizes,
resume positions, the input digest's bytes, lines), from the start or from any batch's end."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.sources import file as file_source
from actors.steps import FileSource, StepEnv
from dag import Position, parse_plan
from tests.unit.dag.csvfiles import mostly_quote_free_files


def source(data: Path, columns: dict[str, str]) -> FileSource:
    config = {"source": "file", "path": "in.csv", "null_values": ["NA"]}
    step = {"name": "read", "type": "ingest", "config": config}
    env = StepEnv("r", data, data / "x", data / "y", None, lambda: None)
    return FileSource(parse_plan({"steps": [step]}).step("read"), env, columns)


def seen(batches) -> list[tuple]:
    return [
        (list(b.records), [e.as_dict() for e in b.row_errors], b.records_in, b.position,
         b.raw_bytes, list(b.lines), b.file)
        for b in batches
    ]  # fmt: skip


def both(ingest: FileSource, start: Position) -> tuple[list, list]:
    by_blocks = seen(ingest._file_batches("in.csv", 0, start, 1))
    with ingest._open("in.csv") as stream:
        by_batches = seen(ingest._read_batches(stream, "in.csv", 0, start, 1))
    return by_blocks, by_batches


_TYPES = st.sampled_from(["int", "date", "string"])


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(mostly_quote_free_files(), st.integers(1, 90), st.lists(_TYPES, min_size=3, max_size=3),
       st.integers(0, 5))  # fmt: skip
def test_blocks_give_the_batches_of_the_batch_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, block: int, types, resume: int
) -> None:
    monkeypatch.setattr(file_source, "BATCH_SIZE", 3)
    (tmp_path / "in.csv").write_bytes(data)
    ingest = source(tmp_path, dict(zip("abc", types, strict=True)))
    ingest.block_bytes = block
    by_blocks, by_batches = both(ingest, Position.from_dict(None))
    assert by_blocks == by_batches
    if resume < len(by_batches):  # an attempt that goes on from a checkpoint
        start = Position.from_dict(by_batches[resume][3]["position"])
        assert both(ingest, start)[0] == both(ingest, start)[1]


def test_a_quote_free_file_is_read_by_blocks_and_a_bad_value_by_the_batch_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_source, "BATCH_SIZE", 500)
    lines = [f"{i},2024-01-{1 + i % 28:02d},NA" for i in range(5000)]
    lines[4321] = "4321,2024-02-30,x"  # not a date: a row error of the batch reader
    (tmp_path / "in.csv").write_text("a,b,c\n" + "\n".join(lines))  # no final line end
    ingest = source(tmp_path, {"a": "int", "b": "date", "c": "string"})
    ingest.block_bytes = 4096
    reads = []
    read = FileSource._read_batches

    def counted(self, *args, **kwargs):
        for batch in read(self, *args, **kwargs):
            reads.append(batch.records_in)
            yield batch

    monkeypatch.setattr(FileSource, "_read_batches", counted)
    by_blocks = seen(ingest._file_batches("in.csv", 0, Position.from_dict(None), 1))
    monkeypatch.setattr(FileSource, "_read_batches", read)
    with ingest._open("in.csv") as stream:
        assert by_blocks == seen(ingest._read_batches(stream, "in.csv", 0, Position(0, 1), 1))
    assert [len(b[0]) for b in by_blocks] == [500] * 8 + [499, 500]
    assert by_blocks[8][1][0]["line"] == 4323  # the bad record's row error, with its line
    assert reads == [500]  # only the batch with the bad value: the rest by blocks
    assert by_blocks[-1][3] == {"position": {"offset": (tmp_path / "in.csv").stat().st_size,
                                             "line": 5001}}  # fmt: skip


@pytest.mark.parametrize("tail", ['"q",1,2', "4,5,6", "4,5,6\n", '"q",1,2\n\n', "4,5,6\n\n\n"])
def test_a_file_that_ends_with_a_full_batch_gives_no_empty_batch_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: str
) -> None:
    """Its last batch read by blocks, or by the batch reader (a quote in it); empty lines
    after it give no batch either."""
    monkeypatch.setattr(file_source, "BATCH_SIZE", 3)
    (tmp_path / "in.csv").write_text("a,b,c\n1,2,3\n1,2,3\n1,2,3\n1,2,3\n1,2,3\n" + tail + "\n")
    ingest = source(tmp_path, {"a": "string", "b": "int", "c": "int"})
    ingest.block_bytes = 12
    by_blocks, by_batches = both(ingest, Position.from_dict(None))
    assert by_blocks == by_batches
    assert [b[2] for b in by_blocks] == [3, 3]


def test_a_line_longer_than_a_block_may_grow_is_read_by_the_batch_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line past `MAX_BLOCK_BYTES` is never read whole into a block (the batch reader
    holds a long record a field at a time); the blocks go on after it."""
    from dag import blockbatches, csvblocks

    monkeypatch.setattr(file_source, "BATCH_SIZE", 2)
    for module in (csvblocks, blockbatches):
        monkeypatch.setattr(module, "MAX_BLOCK_BYTES", 64)
    rows = [f"{i},{i},x" for i in range(9)]
    rows[4] = "4,4," + "y" * 500
    (tmp_path / "in.csv").write_text("a,b,c\n" + "\n".join(rows) + "\n")
    ingest = source(tmp_path, {"a": "int", "b": "int", "c": "string"})
    ingest.block_bytes = 16
    by_blocks, by_batches = both(ingest, Position.from_dict(None))
    assert by_blocks == by_batches
    assert [b[2] for b in by_blocks] == [2, 2, 2, 2, 1]
    assert by_blocks[2][0][0]["c"] == "y" * 500
    with (tmp_path / "in.csv").open("rb") as stream:  # not even read whole into a block
        assert csvblocks.read_block(stream, len("a,b,c\n0,0,x\n1,1,x\n2,2,x\n"), 16) is None
