"""The inference pass of a CSV ingest (`FileSource.infer`) stops reading a file once every
undeclared column is a string (`ColumnInference.settled`): the same types and evidence as a
pass over every record, each file's header still checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.steps import FileSource, StepEnv
from dag import BATCH_SIZE, ConfigValueError, parse_plan
from dag.inference import ColumnInference
from dag.records import RawRecord

RECORDS = 3 * BATCH_SIZE


@pytest.fixture(autouse=True)
def no_schema_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    """Schema drift is met on the state database; these attempts have none."""
    monkeypatch.setattr("actors.sources.file.meet_schema", lambda *args: None)


def source(data: Path, path: str, **config) -> FileSource:
    step = {"name": "read", "type": "ingest", "config": {"source": "file", "path": path, **config}}
    env = StepEnv("r", data, data / "x", data / "y", None, lambda: None)
    return FileSource(parse_plan({"steps": [step]}).step("read"), env, None)


def batches_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A count of the raw batches `FileSource` reads, per pass over a file."""
    passes: list[int] = []
    read = FileSource._raw_batches

    def counted(self, stream, start):
        passes.append(0)
        for raw in read(self, stream, start):
            passes[-1] += 1
            yield raw

    monkeypatch.setattr(FileSource, "_raw_batches", counted)
    return passes


def write(path: Path, late: str) -> None:
    rows = [f"{i},name {i},{i}" for i in range(1, RECORDS + 1)]
    rows[-1] = late
    path.write_text("id,name,code\n" + "\n".join(rows) + "\n")


def test_a_csv_of_strings_is_read_for_inference_only_until_settled(tmp_path, monkeypatch):
    write(tmp_path / "a.csv", f'{RECORDS},"x"y,z')  # a malformed record at the end
    passes = batches_read(monkeypatch)
    ingest = source(tmp_path, "a.csv", columns={"id": "int", "code": "string"})
    assert ingest.infer() == {"id": "int", "name": "string", "code": "string"}
    assert passes == [1]
    assert ingest.evidence == {"name": "string: 'name 1' at line 2 is neither an int64 nor a date"}
    got = list(ingest.batches(None, 0))
    assert sum(len(b.records) for b in got) == RECORDS - 1
    assert [e.line for b in got for e in b.row_errors] == [RECORDS + 1]


def test_a_column_still_in_doubt_is_read_to_the_end(tmp_path, monkeypatch):
    write(tmp_path / "a.csv", f"{RECORDS},late,x{RECORDS}")  # `code`: int until the end
    passes = batches_read(monkeypatch)
    ingest = source(tmp_path, "a.csv")
    assert ingest.infer() == {"id": "int", "name": "string", "code": "string"}
    # every batch of records: the first, then the rest in one block that its last line
    # sends back to the batch reader (`dag.infer_blocks`)
    assert passes == [1, 2]
    assert ingest.evidence["code"] == (
        f"string: 'x{RECORDS}' at line {RECORDS + 1} is not an int64, '1' at line 2 is not"
        " an ISO date"
    )


def test_every_file_of_a_glob_has_its_header_checked_once_settled(tmp_path, monkeypatch):
    (tmp_path / "d").mkdir()
    write(tmp_path / "d" / "1.csv", "1,a,b")
    (tmp_path / "d" / "2.csv").write_text("id,other,code\n1,a,b\n")
    passes = batches_read(monkeypatch)
    with pytest.raises(ConfigValueError, match="differ from the first file"):
        source(tmp_path, "d/*.csv", columns={"id": "int", "code": "string"}).infer()
    assert passes == [1, 1]


def test_settled_once_no_undeclared_column_can_be_an_int_or_a_date():
    inference = ColumnInference(["a", "b"], {"a": "int"})
    assert not inference.settled  # `b` has no value yet
    inference.observe([RawRecord(2, {"a": "1", "b": "2023-01-01"})])
    assert not inference.settled
    inference.observe([RawRecord(3, {"a": "2", "b": "x"})])
    assert inference.settled
    assert ColumnInference(["a"], {"a": "int"}).settled  # nothing to infer
