"""Attempt-safe export and reject files (`connectors.fileexport`), on real files in tmp_path:
chunks are replaced not duplicated, publish takes exactly the committed chunks, is
idempotent, refuses holes, and a reader never sees a partial file."""

from __future__ import annotations

import csv
import io
import json
import threading
import uuid
from pathlib import Path

import pytest

from connectors import (
    ChunkedFile,
    ChunkMissing,
    ExportPathRefused,
    StagedOutputLost,
    count_records,
    encode_csv,
    encode_jsonl,
    encode_rejects,
    export_file,
    reject_file,
)
from dag import read_csv_batches
from dag.errors import InputDataError
from dag.records import RowError

RUN = uuid.UUID("0b6f3c1e-9a53-4d0e-8f5e-2d1c7a9b4e10")


def _chunked(tmp_path: Path) -> ChunkedFile:
    return export_file(tmp_path / "exports", RUN, "to_file", "out/customers.jsonl")


def _published(f: ChunkedFile) -> bool:
    """The stage was replaced by the published marker (an empty file) and no chunk is left."""
    return f.stage_dir.is_file() and f.stage_dir.stat().st_size == 0


def test_paths_of_export_and_reject_files(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    assert f.final_path == tmp_path / "exports" / str(RUN) / "out" / "customers.jsonl"
    assert f.stage_dir == tmp_path / "exports" / ".stage" / str(RUN) / "to_file"
    r = reject_file(tmp_path / "rejects", str(RUN), "read")
    assert r.final_path == tmp_path / "rejects" / str(RUN) / "read.jsonl"
    assert r.stage_dir == tmp_path / "rejects" / ".stage" / str(RUN) / "read"


@pytest.mark.parametrize(
    "rel",
    ["", "/etc/passwd", "../x.csv", "a/../../x.csv", "a\\..\\x", ".stage/x", "dir/", ".", "a\x00"],
)
def test_export_path_refused(tmp_path: Path, rel: str) -> None:
    with pytest.raises(ExportPathRefused):
        export_file(tmp_path, RUN, "s", rel)
    assert issubclass(ExportPathRefused, InputDataError)


@pytest.mark.parametrize("step", ["", ".", "..", "a/b", "a\\b"])
def test_step_name_that_is_not_a_file_name_refused(tmp_path: Path, step: str) -> None:
    with pytest.raises(ExportPathRefused):
        export_file(tmp_path, RUN, step, "x.csv")
    with pytest.raises(ExportPathRefused):
        reject_file(tmp_path, RUN, step)


def test_run_id_must_be_a_uuid(tmp_path: Path) -> None:
    with pytest.raises(ExportPathRefused):
        export_file(tmp_path, "../../etc", "s", "x.csv")


def test_nothing_visible_until_publish_then_exact_content(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    f.write_chunk(0, b"a\n")
    f.write_chunk(1, b"b\n")
    assert not f.final_path.exists()
    f.publish(2)
    assert f.final_path.read_bytes() == b"a\nb\n"
    assert _published(f)
    assert [p.name for p in f.final_path.parent.iterdir()] == ["customers.jsonl"]


def test_rewriting_a_chunk_replaces_it(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    f.write_chunk(0, b"a\n")
    f.write_chunk(1, b"b-first-attempt\n")
    f.write_chunk(1, b"b\n")  # the batch processed again after a crash
    assert [c.read() for c in f.staged(2)] == [b"a\n", b"b\n"]
    assert [p.suffix for p in f.stage_dir.iterdir()] == [".chunks"]  # one log, appended
    f.publish(2)
    assert f.final_path.read_bytes() == b"a\nb\n"


def test_publish_ignores_chunks_beyond_the_committed_count(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    for seq in range(4):
        f.write_chunk(seq, f"{seq}\n".encode())
    f.publish(3)  # chunk 3 was written but its checkpoint never committed
    assert f.final_path.read_bytes() == b"0\n1\n2\n"
    assert _published(f)


def test_publish_twice_is_a_no_op(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    f.write_chunk(0, b"x\n")
    f.publish(1)
    before = f.final_path.stat()
    f.publish(1)
    assert f.final_path.read_bytes() == b"x\n"
    assert f.final_path.stat().st_ino == before.st_ino


def test_publish_again_after_a_crash_before_the_stage_was_removed(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    f.write_chunk(0, b"x\n")
    f.write_chunk(1, b"y\n")
    f.final_path.parent.mkdir(parents=True, exist_ok=True)
    f.final_path.write_bytes(b"x\ny\n")  # renamed into place, then the process died
    (f.final_path.parent / f".{f.final_path.name}.deadbeef.tmp").write_bytes(b"x\n")
    f.publish(2)
    assert f.final_path.read_bytes() == b"x\ny\n"
    assert sorted(p.name for p in f.final_path.parent.iterdir()) == ["customers.jsonl"]


def test_a_hole_is_never_published(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    f.write_chunk(0, b"a\n")
    f.write_chunk(2, b"c\n")
    with pytest.raises(ChunkMissing, match="00000001"):
        f.publish(3)
    assert not f.final_path.exists()
    assert [c.read() for c in f.staged(1)] == [b"a\n"]  # nothing was thrown away


def test_publish_with_no_stage_and_no_file(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    with pytest.raises(ChunkMissing):
        f.publish(1)
    f.publish(0)  # a step with no output publishes an empty file
    assert f.final_path.read_bytes() == b""


def test_discard_drops_the_stage_only(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    f.write_chunk(0, b"old\n")
    f.publish(1)
    f.discard()  # a step that starts over
    f.write_chunk(0, b"new\n")
    assert f.discard()
    assert not f.discard()
    assert not f.stage_dir.exists() and not f.stage_dir.parent.exists()
    assert f.final_path.read_bytes() == b"old\n"


def test_a_stale_write_after_the_publish_leaves_nothing(tmp_path: Path) -> None:
    # Regression: an executor frozen past its lease woke after the step that took over had
    # published, wrote its chunk and re-created the stage inside the published directory.
    f = _chunked(tmp_path)
    f.write_chunk(0, b"a\n")
    f.write_chunk(1, b"b\n")
    f.publish(2)
    for seq in (0, 2):  # a stale attempt that was at its first batch, or at a later one
        with pytest.raises(FileExistsError):
            f.write_chunk(seq, b"stale\n")
    run_dir = tmp_path / "exports" / str(RUN)
    assert [str(p.relative_to(run_dir)) for p in run_dir.rglob("*")] == [
        "out",
        "out/customers.jsonl",
    ]
    staged = [p for p in (tmp_path / "exports").rglob("*") if p.is_file()]
    assert sorted(p.name for p in staged) == ["customers.jsonl", "to_file"]  # the marker
    f.publish(2)  # the stale attempt's publish (were it to get that far) is a no-op
    assert f.final_path.read_bytes() == b"a\nb\n"


def test_two_steps_of_a_run_stage_apart(tmp_path: Path) -> None:
    a = export_file(tmp_path, RUN, "a", "a.csv")
    b = export_file(tmp_path, RUN, "b", "b.csv")
    a.write_chunk(0, b"a\n")
    b.write_chunk(0, b"b\n")
    a.publish(1)
    assert [c.read() for c in b.staged(1)] == [b"b\n"]
    b.publish(1)
    assert (tmp_path / str(RUN) / "a.csv").read_bytes() == b"a\n"
    assert (tmp_path / str(RUN) / "b.csv").read_bytes() == b"b\n"


@pytest.mark.timeout(60)
def test_a_reader_never_sees_a_partial_file(tmp_path: Path) -> None:
    chunk = b"0123456789abcdef" * 65536  # 1 MiB
    n = 24
    for round_ in range(3):
        f = export_file(tmp_path, RUN, f"s{round_}", f"big{round_}.bin")
        for seq in range(n):
            f.write_chunk(seq, chunk)
        stop = threading.Event()
        partial: list[int] = []

        def read_loop(path: Path = f.final_path, stop=stop, partial=partial) -> None:
            while not stop.is_set():
                try:
                    data = path.read_bytes()
                except FileNotFoundError:
                    continue
                if data != chunk * n:
                    partial.append(len(data))

        reader = threading.Thread(target=read_loop)
        reader.start()
        f.publish(n)
        stop.set()
        reader.join()
        assert partial == []
        assert f.final_path.stat().st_size == len(chunk) * n


def test_encode_jsonl_keeps_key_order_and_unicode() -> None:
    data = encode_jsonl([{"b": 1, "a": "é\n", "c": None}, {"x": "2024-01-31"}])
    lines = data.decode("utf-8").splitlines()
    assert lines[0] == '{"b":1,"a":"é\\n","c":null}'
    assert list(json.loads(lines[0])) == ["b", "a", "c"]
    assert json.loads(lines[1]) == {"x": "2024-01-31"}
    assert encode_jsonl([]) == b""


def test_encode_csv_header_only_when_asked_and_nulls_empty() -> None:
    records = [{"id": 1, "name": 'a "q", b\nline', "d": None}, {"id": 2, "name": "", "d": "x"}]
    first = encode_csv(records, {"id": "int", "name": "string", "d": "date"}, header=True)
    later = encode_csv(records, ["id", "name", "d"], header=False)
    assert first.startswith(b"id,name,d\n")
    assert first[len(b"id,name,d\n") :] == later
    rows = list(csv.reader(io.StringIO(first.decode("utf-8"))))
    assert rows == [["id", "name", "d"], ["1", 'a "q", b\nline', ""], ["2", "", "x"]]
    assert b"\r" not in first


def test_encode_rejects_one_line_per_error() -> None:
    errors = [
        RowError("not an int", line=3, record=2, column="id", raw="x,y"),
        RowError("bad json", raw={"k": [1]}),
    ]
    lines = encode_rejects(errors).decode("utf-8").splitlines()
    assert [json.loads(x) for x in lines] == [e.as_dict() for e in errors]


def test_reject_file_round_trip(tmp_path: Path) -> None:
    r = reject_file(tmp_path, RUN, "read")
    r.write_chunk(0, encode_rejects([RowError("a", line=1, record=1)]))
    r.write_chunk(1, encode_rejects([RowError("b", line=9, record=7)]))
    r.write_chunk(1, encode_rejects([RowError("b", line=9, record=7)]))
    r.publish(2)
    lines = r.final_path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["reason"] for x in lines] == ["a", "b"]


def test_a_crash_while_deleting_the_stage_leaves_publish_retryable(tmp_path: Path) -> None:
    # Regression: publish deleted the stage chunk by chunk; a crash halfway left a stage
    # with holes, and every retry refused to publish although the final file was complete.
    f = _chunked(tmp_path)
    for seq in range(3):
        f.write_chunk(seq, f"{seq}\n".encode())
    f.publish(3)
    # what a crash after the rename and before the delete leaves behind
    f._tombstone().mkdir()
    (f._tombstone() / "00000001.chunk").write_bytes(b"x")
    f.publish(3)
    assert f.final_path.read_bytes() == b"0\n1\n2\n"
    f.discard()
    assert not f._tombstone().exists()


def test_csv_export_keeps_empty_strings_apart_from_nulls() -> None:
    data = encode_csv(
        [{"a": "", "b": None, "c": 'x,"y"\nz', "d": 5}], ["a", "b", "c", "d"], header=True
    )
    (batch,) = list(read_csv_batches(io.BytesIO(data)))
    assert batch.records[0].values == {"a": "", "b": None, "c": 'x,"y"\nz', "d": "5"}


def test_staged_lists_the_committed_chunks_or_refuses_a_hole(tmp_path: Path) -> None:
    f = _chunked(tmp_path)
    assert f.staged(0) == []
    with pytest.raises(ChunkMissing):
        f.staged(1)
    f.write_chunk(0, b"a\n")
    f.write_chunk(1, b"b\n")
    assert [(c.seq, c.read()) for c in f.staged(2)] == [(0, b"a\n"), (1, b"b\n")]
    (log,) = f.stage_dir.iterdir()
    log.unlink()
    with pytest.raises(ChunkMissing, match="00000000, 00000001") as caught:
        f.staged(2)
    assert isinstance(caught.value, StagedOutputLost)  # the step starts over
    f.write_chunk(0, b"a\n")  # into a new log: the one it wrote to is gone
    with pytest.raises(ChunkMissing, match="00000001"):
        f.staged(2)
    f.write_chunk(1, b"b\n")
    f.publish(2)
    assert f.staged(2) is None  # published


def test_count_records_reads_the_files_as_they_were_encoded(tmp_path: Path) -> None:
    records = [{"id": 1, "note": "two\nlines, and a comma"}, {"id": 2, "note": None}]
    jsonl, csv_head, csv_rest = tmp_path / "a.jsonl", tmp_path / "0.csv", tmp_path / "1.csv"
    jsonl.write_bytes(encode_jsonl(records * 3))
    csv_head.write_bytes(encode_csv(records, ["id", "note"], header=True))
    csv_rest.write_bytes(encode_csv(records, ["id", "note"], header=False))
    assert count_records([jsonl], "jsonl") == 6
    assert count_records([csv_head, csv_rest], "csv") == 4
    empty = tmp_path / "e.csv"
    empty.write_bytes(encode_csv([], ["id"], header=True))
    assert count_records([empty], "csv") == 0
