"""`etl preview`: offline (file ingests in a tmp data directory, no database), its exit
statuses, its JSON, the per-step view, and a plan that triggers each warning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.preview import preview_plan
from dag import RawBatch, RawRecord, RowError, parse_plan
from service.cli import main

CSV = (
    "id,name,status,day,amount\n"
    "1, Ann ,A,2024-01-05,10\n"
    '2,"Bob\n Jr",I,not a date,\n'
    "3,Cy,I,2024-13-01,\n"
    "3,Di,I,2024-02-03,\n"
    ",Ed,I,oops,\n"
)


def _read(columns: dict | None = None) -> dict:
    config: dict[str, Any] = {"source": "file", "path": "in.csv", "format": "csv"}
    if columns:
        config["columns"] = columns
    return {"name": "read", "type": "ingest", "config": config}


def _plan(*steps: dict, mode: str = "reject") -> dict:
    chained = []
    previous = "read"
    for step in steps:
        step = {"depends_on": [previous], **step}
        chained.append(step)
        previous = step["name"]
    return {"on_row_error": mode, "steps": [_read(), *chained]}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data directory with `in.csv`; ETL_* point into tmp (the CLI reads its config from
    the environment like every `etl` command)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.csv").write_text(CSV, encoding="utf-8")
    monkeypatch.setenv("ETL_DATA_DIR", str(data))
    monkeypatch.setenv("ETL_EXPORT_DIR", str(tmp_path / "exports"))
    monkeypatch.setenv("ETL_SANDBOX_URL", "postgresql://postgres@127.0.0.1:1/nowhere")
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps at the terminal width
    return tmp_path


def _run(tmp: Path, doc: object, *args: str, capsys: pytest.CaptureFixture) -> tuple[int, str]:
    path = tmp / "plan.json"
    path.write_text(json.dumps(doc))
    code = main(["preview", str(path), *args])
    return code, capsys.readouterr().out


def _json(tmp: Path, doc: object, capsys, *args: str) -> tuple[int, dict]:
    code, out = _run(tmp, doc, "--json", *args, capsys=capsys)
    return code, json.loads(out)


def _warnings(body: dict, step: str) -> list[str]:
    return [w["code"] for s in body["steps"] if s["name"] == step for w in s["warnings"]]


def test_preview_prints_types_evidence_counts_sample_and_row_errors(env: Path, capsys) -> None:
    plan = _plan(
        {"name": "clean", "type": "transform",
         "config": {"op": "normalize_whitespace", "columns": ["name"]}},
    )  # fmt: skip
    plan["steps"][0]["config"]["columns"] = {"amount": "int"}
    code, out = _run(env, {"name": "p", "plan": plan}, capsys=capsys)
    assert code == 0, out
    assert "records in 5 · out 5 · rejected 0" in out
    assert "id int (inferred)" in out and "amount int (inferred)" not in out
    assert "  id: int: all 4 value(s) are int64" in out  # every value of the file
    assert (
        "  day: string: '2024-01-05' at line 2 is not an int64,"
        " 'not a date' at line 3 is not an ISO date"
    ) in out
    assert "Bob Jr" in out and "nothing is written" in out
    assert not (env / "exports").exists()  # an export is shown, never written


def test_json_answer_has_every_part_and_writes_nothing(env: Path, capsys) -> None:
    plan = _plan(
        {"name": "dates", "type": "transform", "config": {"op": "parse_date", "column": "day"}},
        {"name": "out", "type": "export",
         "config": {"target": "file", "path": "o/out.csv", "format": "csv"}},
    )  # fmt: skip
    code, body = _json(env, plan, capsys, "--records", "4")
    assert code == 0 and body["ok"] is True and body["records"] == 4
    read, dates, out = body["steps"]
    assert read["columns"] == {
        "id": "int", "name": "string", "status": "string", "day": "string", "amount": "int",
    }  # fmt: skip
    assert set(read["inferred"]) == set(read["columns"])
    assert (read["records_in"], dates["records_out"], dates["rejected"]) == (4, 2, 2)
    assert dates["row_errors"][0] == {
        "line": None, "record": 2, "column": "day",
        "reason": "not an ISO date (YYYY-MM-DD): 'not a date'",
        "raw": {"id": 2, "name": "Bob\n Jr", "status": "I", "day": "not a date", "amount": None},
    }  # fmt: skip
    assert out["export"]["path"].endswith("exports/<run_id>/o/out.csv")
    assert out["export"]["text"] == (
        "id,name,status,day,amount\n1, Ann ,A,2024-01-05,10\n3,Di,I,2024-02-03,\n"
    )
    assert not (env / "exports").exists()


def test_a_row_error_in_stop_mode_exits_1_and_its_dependents_do_not_run(env, capsys) -> None:
    plan = _plan(
        {"name": "dates", "type": "transform", "config": {"op": "parse_date", "column": "day"}},
        {"name": "trim", "type": "transform", "config": {"op": "trim", "columns": ["name"]}},
        mode="stop",
    )
    code, body = _json(env, plan, capsys)
    assert code == 1 and body["ok"] is False
    assert [s["status"] for s in body["steps"]] == ["ok", "failed", "upstream_failed"]
    assert body["steps"][1]["error"] == (
        "RowValueError: column 'day': not an ISO date (YYYY-MM-DD): 'not a date'"
    )
    assert body["steps"][1]["rejected"] == 3  # every row error of the sample is listed
    code, _ = _json(env, {**plan, "on_row_error": "reject"}, capsys)
    assert code == 0


def test_a_config_that_does_not_fit_the_data_fails_its_step(env: Path, capsys) -> None:
    plan = _plan({"name": "m", "type": "transform", "config": {"op": "trim", "columns": ["x"]}})
    code, body = _json(env, plan, capsys)
    assert code == 1
    assert body["steps"][1]["error"] == (
        "ConfigValueError: column 'x': trim: no column 'x' in the input;"
        " its columns: id, name, status, day, amount"
    )  # a typo is told the columns there are, and the nearest one
    typo = _plan({"name": "m", "type": "transform", "config": {"op": "trim", "columns": ["nmae"]}})
    assert _json(env, typo, capsys)[1]["steps"][1]["error"].endswith(
        "its columns: id, name, status, day, amount (did you mean 'name'?)"
    )


def test_a_missing_source_file_names_the_data_directory_and_near_names(env: Path, capsys) -> None:
    plan = _plan()
    plan["steps"][0]["config"]["path"] = "inn.csv"
    code, body = _json(env, plan, capsys)
    assert code == 1
    assert body["steps"][0]["error"].endswith(
        f"source file 'inn.csv' does not exist in the data directory {env / 'data'}"
        " (ETL_DATA_DIR); did you mean 'in.csv'?"
    )


def test_an_invalid_plan_exits_2_with_validates_errors(env: Path, capsys) -> None:
    doc = {"name": "", "plan": {"steps": [{"name": "a", "type": "ingest"}]}}
    code, out = _run(env, doc, capsys=capsys)
    assert code == 2
    assert main(["validate", str(env / "plan.json")]) == 1
    assert out == capsys.readouterr().out  # the same lines as `etl validate`
    code, body = _json(env, doc, capsys)
    assert code == 2 and body["error"]["code"] == "invalid_plan"
    assert {"field": "name", "message": "must be a non-empty string"} in body["error"]["details"]
    code, out = _run(env, _plan(), "--step", "nope", capsys=capsys)
    assert (code, out) == (2, "step: no step 'nope' in the plan\n")


def test_records_is_bounded(env: Path, capsys) -> None:
    for bad in ("0", "5001", "x"):
        with pytest.raises(SystemExit) as exc:
            _run(env, _plan(), "--records", bad, capsys=capsys)
        assert exc.value.code == 2


def test_step_previews_only_that_step_and_what_it_needs(env: Path, capsys) -> None:
    plan = _plan(
        {"name": "a", "type": "transform", "config": {"op": "trim", "columns": ["name"]}},
        {"name": "b", "type": "transform", "config": {"op": "trim", "columns": ["status"]}},
    )
    code, body = _json(env, plan, capsys, "--step", "a")
    assert code == 0 and [s["name"] for s in body["steps"]] == ["read", "a"]


def test_a_path_outside_the_data_directory_is_refused_like_ingest(env: Path, capsys) -> None:
    (env / "secret.csv").write_text("a\n1\n")
    (env / "data" / "link.csv").symlink_to(env / "secret.csv")
    plan = _plan()
    plan["steps"][0]["config"]["path"] = "link.csv"
    code, body = _json(env, plan, capsys)
    assert code == 1
    assert body["steps"][0]["error"] == (
        "SourceRefused: source path 'link.csv' leaves the data directory"
    )
    plan["steps"][0]["config"]["path"] = "../secret.csv"
    code, body = _json(env, plan, capsys)
    assert code == 2  # validation refuses `..` already


def test_a_table_ingest_says_it_reads_read_only_and_fails_without_a_sandbox(env, capsys) -> None:
    plan = {"steps": [{"name": "t", "type": "ingest", "config": {"source": "table", "table": "x"}}]}
    code, body = _json(env, plan, capsys)
    assert code == 1
    assert body["steps"][0]["source"]["read_only"] is True
    assert body["steps"][0]["error"].startswith("OperationalError")


def test_a_preview_past_its_time_limit_fails_the_running_step(env: Path) -> None:
    ticks = iter(range(100))
    preview = preview_plan(
        parse_plan(
            _plan({"name": "a", "type": "transform", "config": {"op": "trim", "columns": ["name"]}})
        ),
        data_dir=env / "data",
        export_dir=env / "exports",
        time_limit_s=1.5,
        clock=lambda: float(next(ticks)),
    )
    assert [s.status for s in preview.steps] == ["failed", "upstream_failed"]
    assert preview.steps[0].error == "preview time limit of 1.5 s exceeded"


# --- warnings: one plan each -----------------------------------------------------------------


def test_warning_map_all_default(env: Path, capsys) -> None:
    step = {"name": "m", "type": "transform",
            "config": {"op": "map", "column": "status", "mapping": {"active": "yes"},
                       "into": "label", "default": "other"}}  # fmt: skip
    _, body = _json(env, _plan(step), capsys)
    assert _warnings(body, "m") == ["map_all_default"]
    step["config"]["mapping"] = {"A": "yes"}
    _, body = _json(env, _plan(step), capsys)
    assert _warnings(body, "m") == []


def test_warning_filter_eq_kept_nothing(env: Path, capsys) -> None:
    step = {"name": "f", "type": "transform",
            "config": {"op": "filter_eq", "column": "status", "value": "active"}}  # fmt: skip
    _, body = _json(env, _plan(step), capsys)
    assert _warnings(body, "f") == ["filter_kept_none"]
    step["config"]["value"] = "A"
    _, body = _json(env, _plan(step), capsys)
    assert _warnings(body, "f") == []


def test_warning_aggregate_over_an_all_null_column(env: Path, capsys) -> None:
    step = {"name": "g", "type": "transform",
            "config": {"op": "aggregate", "column": "amount", "group_by": ["status"]}}  # fmt: skip
    only_i = {"name": "i", "type": "transform",
              "config": {"op": "filter_eq", "column": "status", "value": "I"}}  # fmt: skip
    _, body = _json(env, _plan(only_i, step), capsys)  # records 2..5: amount is null
    assert _warnings(body, "g") == ["aggregate_all_null"]
    _, body = _json(env, _plan(step), capsys)  # record 1 has amount 10
    assert _warnings(body, "g") == []


def test_warning_export_key_duplicates_and_nulls(env: Path, capsys) -> None:
    step = {"name": "t", "type": "export",
            "config": {"target": "table", "table": "people", "key": "id"}}  # fmt: skip
    code, body = _json(env, _plan(step), capsys)
    assert code == 0
    assert _warnings(body, "t") == ["export_key_nulls", "export_key_duplicates"]
    out = body["steps"][1]
    assert (out["records_out"], out["rejected"]) == (3, 2)
    assert out["export"]["table"] == "sandbox.people"
    assert [r["record_key"] for r in out["export"]["rows"]] == ["1", "2", "3"]
    step["config"]["key"] = "name"
    _, body = _json(env, _plan(step), capsys)
    assert _warnings(body, "t") == []


def test_warning_parse_date_failing_on_more_than_half(env: Path, capsys) -> None:
    step = {"name": "d", "type": "transform", "config": {"op": "parse_date", "column": "day"}}
    _, body = _json(env, _plan(step), capsys)
    assert _warnings(body, "d") == ["parse_date_mostly_failed"]  # 3 of 5
    _, body = _json(env, _plan(step), capsys, "--records", "4")
    assert _warnings(body, "d") == []  # 2 of 4 is not more than half


# --- the pure parts --------------------------------------------------------------------------


def test_raw_batch_head_keeps_file_order_across_good_and_bad_records() -> None:
    batch = RawBatch(
        records=[RawRecord(1, {"a": "1"}), RawRecord(4, {"a": "2"}), RawRecord(6, {"a": "3"})],
        row_errors=[RowError("bad", line=2), RowError("bad", line=5)],
        end=None,  # type: ignore[arg-type]
    )
    assert batch.head(3) == (
        [RawRecord(1, {"a": "1"}), RawRecord(4, {"a": "2"})],
        [batch.row_errors[0]],
    )
    assert batch.head(0) == ([], [])
    assert batch.head(9) == (batch.records, batch.row_errors)


def test_preview_proposes_the_encoding_and_delimiter_it_detects(env: Path, capsys) -> None:
    """A cp1252, `;`-delimited export read with the defaults fails, and the preview says
    what the file looks like; declared so, it reads and nothing is proposed."""
    rows = "id;name;amount\n1;Renée;10\n2;Zoë;€5\n"
    (env / "data" / "in.csv").write_bytes(rows.encode("cp1252"))
    plan = {"on_row_error": "reject", "steps": [_read({"name": "string"})]}
    code, body = _json(env, plan, capsys)
    (read,) = body["steps"]
    assert code == 1 and "not in the input" in read["error"]
    assert read["dialect"] == {
        "encoding": "cp1252",
        "delimiter": ";",
        "declared": {"encoding": "utf-8", "delimiter": ","},
        "message": "the input looks like encoding 'cp1252' (declared 'utf-8'),"
        " delimiter ';' (declared ',')",
    }
    code, out = _run(env, plan, capsys=capsys)
    assert "dialect the input looks like encoding 'cp1252'" in out
    plan["steps"][0]["config"].update(encoding="cp1252", delimiter=";")
    code, body = _json(env, plan, capsys)
    (read,) = body["steps"]
    assert code == 0 and read["dialect"] is None
    assert [r["name"] for r in read["sample"]] == ["Renée", "Zoë"]
