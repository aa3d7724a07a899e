"""`etl validate PLAN.json`: offline plan validation (no database)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main

PLAN = {
    "on_failure": "continue_independent",
    "steps": [
        {"name": "to_file", "type": "export", "depends_on": ["clean"],
         "config": {"target": "file", "path": "out.jsonl", "format": "jsonl"}},
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "in.csv", "format": "csv"}},
        {"name": "clean", "type": "transform", "depends_on": ["read"],
         "config": {"op": "trim", "columns": ["name"]}},
    ],
}  # fmt: skip


def _write(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("doc", [PLAN, {"name": "people", "plan": PLAN}], ids=["bare", "document"])
def test_a_valid_plan_prints_the_execution_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: object
) -> None:
    assert main(["validate", _write(tmp_path, doc)]) == 0
    assert capsys.readouterr().out == "ok: 3 steps: read -> clean -> to_file\n"


def test_an_invalid_plan_prints_every_error_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = json.loads(json.dumps(PLAN))
    broken["steps"][0]["depends_on"] = ["nowhere"]
    broken["steps"][1]["type"] = "download"
    assert main(["validate", _write(tmp_path, {"name": "", "plan": broken})]) == 1
    lines = capsys.readouterr().out.splitlines()
    fields = [line.split(": ", 1)[0] for line in lines]
    assert fields[0] == "name"
    assert "plan.steps[0].depends_on[0]" in fields and "plan.steps[1].type" in fields
    assert any("nowhere" in line for line in lines)


def test_a_file_that_is_not_json_or_missing_exits_2_as_for_apply_and_preview(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "plan.json"
    path.write_text("{not json")
    assert main(["validate", str(path)]) == 2
    assert "plan.json" in capsys.readouterr().err
    assert main(["validate", str(tmp_path / "missing.json")]) == 2
