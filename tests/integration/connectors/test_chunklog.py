"""The chunk logs of a file stage (`connectors.chunklog`, through `ChunkedFile`), on real
files in tmp_path: one log per writer however many chunks it writes, the last chunk written
of a seq counts across logs, a record cut short or damaged ends its log, an append that
failed half-way is overwritten by the next one, and the staged chunks' records are counted
as they were encoded."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from connectors import (
    ChunkedFile,
    ChunkMissing,
    chunklog,
    count_records,
    encode_csv,
    encode_jsonl,
    export_file,
)

RUN = uuid.UUID("5d7e0c2a-3b41-4f6e-9c8d-1a2b3c4d5e6f")


def _chunked(tmp_path: Path) -> ChunkedFile:
    return export_file(tmp_path / "exports", RUN, "out", "out.jsonl")


def _logs(f: ChunkedFile) -> list[Path]:
    return sorted(f.stage_dir.glob(f"*{chunklog.LOG_SUFFIX}"))


def test_a_writer_appends_every_chunk_to_one_log(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    for seq in range(100):
        f.write_chunk(seq, f"{seq}\n".encode())
    assert len(list(f.stage_dir.iterdir())) == 1
    f.publish(100)
    assert f.final_path.read_bytes() == b"".join(f"{seq}\n".encode() for seq in range(100))


def test_a_resumed_attempt_writes_a_log_of_its_own_and_its_chunks_count(tmp_path: Path) -> None:
    first = _chunked(tmp_path)
    for seq in range(3):
        first.write_chunk(seq, f"first {seq}\n".encode())  # chunk 2 never committed
    second = _chunked(tmp_path)  # the next attempt, on from the checkpoint after chunk 1
    assert [c.read() for c in second.staged(2)] == [b"first 0\n", b"first 1\n"]
    second.write_chunk(2, b"second 2\n")
    second.write_chunk(3, b"second 3\n")
    assert [p.name[:8] for p in _logs(second)] == ["00000001", "00000002"]
    second.publish(4)
    assert second.final_path.read_bytes() == b"first 0\nfirst 1\nsecond 2\nsecond 3\n"


@pytest.mark.parametrize("cut", ["inside the header", "inside the data", "a damaged byte"])
def test_a_record_cut_short_or_damaged_ends_its_log(tmp_path: Path, cut: str) -> None:
    f = _chunked(tmp_path)
    f.write_chunk(0, b"zero\n")
    f.write_chunk(1, b"one\n" * 100)
    f.write_chunk(2, b"two\n")
    (log,) = _logs(f)
    second = len(b"zero\n") + 2 * chunklog._HEADER.size + 1  # a byte of chunk 1's data
    data = bytearray(log.read_bytes())
    if cut == "inside the header":
        del data[len(b"zero\n") + chunklog._HEADER.size + 10 :]
    elif cut == "inside the data":
        del data[second + 50 :]
    else:
        data[second + 50] ^= 0xFF
    log.write_bytes(bytes(data))
    assert [c.read() for c in f.staged(1)] == [b"zero\n"]
    with pytest.raises(ChunkMissing, match="00000001, 00000002"):
        f.staged(3)


def test_an_append_that_failed_half_way_is_overwritten_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = _chunked(tmp_path)
    f.write_chunk(0, b"zero\n")
    real = os.pwritev

    def half_then_fail(fd: int, buffers: list, offset: int) -> int:
        monkeypatch.setattr(chunklog.os, "pwritev", real)
        real(fd, [bytes(buffers[0])[: len(buffers[0]) // 2]], offset)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(chunklog.os, "pwritev", half_then_fail)
    with pytest.raises(OSError, match="No space"):
        f.write_chunk(1, b"one\n")
    f.write_chunk(1, b"one again\n")
    f.write_chunk(2, b"two\n")
    f.publish(3)
    assert f.final_path.read_bytes() == b"zero\none again\ntwo\n"


def test_a_log_discarded_under_its_writer_gives_way_to_a_new_one(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    f.write_chunk(0, b"old\n")
    other = _chunked(tmp_path)
    assert other.discard()  # an attempt that starts the step over
    f.write_chunk(0, b"new\n")
    f.publish(1)
    assert f.final_path.read_bytes() == b"new\n"


def test_records_are_counted_in_the_staged_chunks_as_encoded(tmp_path: Path) -> None:
    records = [{"id": 1, "note": "two\nlines, and a comma"}, {"id": 2, "note": None}]
    jsonl = _chunked(tmp_path)
    for seq in range(3):
        jsonl.write_chunk(seq, encode_jsonl(records))
    assert count_records(jsonl.staged(3), "jsonl") == 6
    table = export_file(tmp_path / "exports", RUN, "csv_out", "out.csv")
    table.write_chunk(0, encode_csv(records, ["id", "note"], header=True))
    table.write_chunk(1, encode_csv(records, ["id", "note"], header=False))
    assert count_records(table.staged(2), "csv") == 4


def test_a_publish_given_the_staged_chunks_writes_exactly_those(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    for seq in range(3):
        f.write_chunk(seq, f"{seq}\n".encode())
    staged = f.staged(2)
    f.write_chunk(1, b"1\n")  # a stale writer's same chunk, after the count
    f.publish(2, staged)
    assert f.final_path.read_bytes() == b"0\n1\n"
    f.publish(2)  # published: a no-op
    assert f.final_path.read_bytes() == b"0\n1\n"
