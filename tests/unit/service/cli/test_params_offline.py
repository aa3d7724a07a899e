"""`etl validate` and `etl preview` with `--param`: the values bound offline as a trigger
would bind them (typed, substituted, paths checked), each problem named `params.NAME`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main
from tests.unit.service.cli.test_preview import CSV


def templated_plan() -> dict:
    return {
        "params": {"day": {"type": "date"}, "n": {"type": "int", "default": 1}},
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "daily/{day}.csv"}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "file", "path": "out/{day:%Y%m%d}-{n}.jsonl"}},
        ],
    }  # fmt: skip


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    daily = tmp_path / "data" / "daily"
    daily.mkdir(parents=True)
    (daily / "2024-01-05.csv").write_text(CSV, encoding="utf-8")
    monkeypatch.setenv("ETL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ETL_EXPORT_DIR", str(tmp_path / "exports"))
    monkeypatch.setenv("ETL_SANDBOX_URL", "postgresql://postgres@127.0.0.1:1/nowhere")
    (tmp_path / "plan.json").write_text(json.dumps(templated_plan()))
    return tmp_path


def test_validate_checks_the_values_when_given(data: Path, capsys) -> None:
    plan = str(data / "plan.json")
    assert main(["validate", plan]) == 0  # the declarations alone are valid
    assert main(["validate", plan, "--param", "day=2024-01-05", "--param", "n=7"]) == 0
    capsys.readouterr()
    assert main(["validate", plan, "--param", "day=2024-02-30", "--param", "n=x"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["params.day", "params.n"]
    assert main(["validate", plan, "--param", "day=../../x"]) == 1
    assert main(["validate", plan, "--param", "day"]) == 1
    assert "expected NAME=VALUE" in capsys.readouterr().out


def test_preview_reads_the_file_the_values_name(data: Path, capsys) -> None:
    plan = str(data / "plan.json")
    code = main(["preview", plan, "--json", "--param", "day=2024-01-05"])
    body = json.loads(capsys.readouterr().out)
    assert code == 0, body
    assert body["steps"][0]["records_in"] == 5
    assert main(["preview", plan]) == 2  # `day` has no default
    assert "params.day" in capsys.readouterr().out
