"""A glob in a file ingest's `path` (`actors.steps.FileSource`, `connectors.expand_source`):
every matching file in name order as one input, ordinals running on, the checkpoint naming
the file it is in, and a resume from it yielding exactly the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.steps import FileSource, StepEnv
from connectors import SourceMissing, SourceRefused, expand_source
from dag import ConfigValueError, parse_plan

DAYS = {"2013-01-02": "3,c\n4,d\n", "2013-01-01": "1,a\n2,b\n", "2013-01-03": "5,e\n"}


@pytest.fixture(autouse=True)
def no_schema_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    """Schema drift is met on the state database (tests/integration/actors/
    test_schema_drift.py); these attempts have none."""
    monkeypatch.setattr("actors.sources.file.meet_schema", lambda *args: None)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    daily = tmp_path / "data" / "daily"
    daily.mkdir(parents=True)
    for day, rows in DAYS.items():
        (daily / f"{day}.csv").write_text("id,name\n" + rows)
    (daily / "notes.txt").write_text("not a day")
    return tmp_path / "data"


def source(data: Path, path: str) -> FileSource:
    plan = parse_plan({"steps": [{"name": "read", "type": "ingest",
                                  "config": {"source": "file", "path": path}}]})  # fmt: skip
    env = StepEnv("r", data, data / "x", data / "y", None, lambda: None)
    return FileSource(plan.step("read"), env, None)


def test_every_matching_file_in_name_order_is_one_input(data: Path) -> None:
    batches = list(source(data, "daily/*.csv").batches(None, 0))
    assert [r["id"] for b in batches for r in b.records] == [1, 2, 3, 4, 5]
    assert [b.position.get("file", 0) for b in batches] == [0, 1, 2]
    assert source(data, "daily/*.csv").infer() == {"id": "int", "name": "string"}


def test_a_resume_from_the_checkpoint_reads_exactly_the_rest(data: Path) -> None:
    first = list(source(data, "daily/*.csv").batches(None, 0))
    rest = list(source(data, "daily/*.csv").batches(first[0].position, 2))
    assert [r["id"] for b in rest for r in b.records] == [3, 4, 5]
    assert [b.position for b in rest] == [b.position for b in first[1:]]


def test_files_of_one_glob_share_their_header(data: Path) -> None:
    (data / "daily" / "2013-01-04.csv").write_text("id,other\n6,f\n")
    with pytest.raises(ConfigValueError, match="differ from the first file"):
        source(data, "daily/*.csv").infer()


def test_expand_source_guards_the_pattern(data: Path) -> None:
    assert expand_source(data, "daily/2013-01-01.csv") == ["daily/2013-01-01.csv"]
    assert expand_source(data, "daily/2013-01-0[12].csv") == [
        "daily/2013-01-01.csv",
        "daily/2013-01-02.csv",
    ]
    with pytest.raises(SourceMissing, match="no source file matches"):
        expand_source(data, "daily/*.json")
    with pytest.raises(SourceRefused):
        expand_source(data, "../*/x.csv")
