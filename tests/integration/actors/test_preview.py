"""A preview never disagrees with a run: the same plan runs in the real engine (advancer and
step runner in this process, on a test database and the sandbox) and in `preview_plan`;
per step, the status, error, columns, counters, first rows, row errors and export output
of the run's first batch equal the preview's. On the fixtures and on generated CSV."""

from __future__ import annotations

import csv
import io
import json
import shutil
import uuid
import zlib
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg2 import sql

from actors import ExecutorSettings, StepRunner, advance_pipeline
from actors.outputs import columns_from_db, decode_rows
from actors.preview import MAX_RECORDS, SAMPLE_ROWS, PlanPreview, preview_plan
from dag import parse_plan

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
ENGINE_ROW_ERRORS = 20  # step_runs.row_errors keeps the first 20
STATUS = {"succeeded": "ok", "failed": "failed", "upstream_failed": "upstream_failed"}


class Engine:
    """The engine driven in-process: seed a pipeline and a run, then advance and run every
    attempt until the run finishes."""

    def __init__(self, db_url: str, root: Path):
        self.db_url = db_url
        self.data, self.exports = root / "data", root / "exports"
        for d in (self.data, self.exports, root / "rejects"):
            d.mkdir(parents=True, exist_ok=True)
        self.conn = psycopg2.connect(db_url)
        self.runner = StepRunner(
            ExecutorSettings(
                name="t",
                owner="t:preview",
                lease_ttl_s=60,
                heartbeat_s=30,
                step_timeout_s=120,
                data_dir=self.data,
                export_dir=self.exports,
                reject_dir=root / "rejects",
                fusion=False,  # every step stores its output: the first batch is compared
            ),
            connect_state=lambda: psycopg2.connect(db_url),
            connect_sandbox=lambda: psycopg2.connect(db_url),
            wake_run=lambda *a: None,
            wake_attempt=lambda *a: None,
        )

    def close(self) -> None:
        self.conn.close()

    def run(self, plan: dict) -> str:
        pid, rid = str(uuid.uuid4()), str(uuid.uuid4())
        with self.conn.cursor() as cur:
            cur.execute("INSERT INTO pipelines (id, name, revision) VALUES (%s, %s, 1)", (pid, pid))
            cur.execute(
                "INSERT INTO revisions (pipeline_id, number, plan, created_by)"
                " VALUES (%s, 1, %s, 't')",
                (pid, json.dumps(plan)),
            )
            cur.execute(
                "INSERT INTO runs (id, pipeline_id, revision, status, trigger_key, trace_id,"
                " created_by) VALUES (%s, %s, 1, 'queued', %s, 't', 't')",
                (rid, pid, rid),
            )
        self.conn.commit()
        for _ in range(100):
            advance = advance_pipeline(self.conn, pid)
            if not advance.attempts:
                break
            for attempt_id, _trace in advance.attempts:
                self.runner.run_attempt(attempt_id)
        return rid

    def steps(self, rid: str) -> dict[str, dict[str, Any]]:
        """Per step: what the engine committed (status, counters, columns, first batch)."""
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT name, status, error, columns, records_in, records_out, rejected,"
                " row_errors FROM step_runs WHERE run_id = %s",
                (rid,),
            )
            rows = cur.fetchall()
            out = {}
            for name, status, error, cols, n_in, n_out, rejected, row_errors in rows:
                columns = columns_from_db(cols)
                cur.execute(
                    "SELECT payload FROM step_batches WHERE run_id = %s AND step_name = %s"
                    " AND seq >= 0 ORDER BY seq LIMIT 1",  # seq < 0: an aggregate's state
                    (rid, name),
                )
                batch = cur.fetchone()
                first = decode_rows(zlib.decompress(bytes(batch[0])), columns) if batch else []
                out[name] = {
                    "status": STATUS.get(status, status),
                    "error": error,
                    "columns": columns,
                    "records_in": n_in,
                    "records_out": n_out,
                    "rejected": rejected,
                    "row_errors": row_errors,
                    "first_rows": first,
                }
        self.conn.rollback()
        return out

    def table_rows(self, table: str, rid: str, step: str) -> dict[str, dict]:
        with self.conn.cursor() as cur:
            cur.execute(
                sql.SQL("SELECT * FROM sandbox.{} WHERE run_id = %s AND step_id = %s").format(
                    sql.Identifier(table)
                ),
                (rid, step),
            )
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        self.conn.rollback()
        return {r["record_key"]: r for r in rows}


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def assert_same(engine: Engine, rid: str, plan: dict, preview: PlanPreview) -> None:
    """Step by step, the run's committed first batch equals the preview."""
    ran = engine.steps(rid)
    parsed = parse_plan(plan)
    assert [s.name for s in preview.steps] and len(preview.steps) == len(ran)
    for view in preview.steps:
        step, run = parsed.step(view.name), ran[view.name]
        where = f"step {view.name}"
        assert view.status == run["status"], (where, view.error, run["error"])
        if run["status"] == "failed":
            assert view.error == run["error"], where
            continue
        if run["status"] != "ok":
            continue
        assert view.columns == run["columns"], where
        assert (view.records_in, view.records_out, view.rejected) == (
            run["records_in"],
            run["records_out"],
            run["rejected"],
        ), where
        assert _json(view.row_errors[:ENGINE_ROW_ERRORS]) == _json(run["row_errors"]), where
        keeps_output = step.type != "export" or parsed.dependents(step.name)
        if keeps_output:
            assert view.sample == run["first_rows"][:SAMPLE_ROWS], where
        if step.type == "export" and step.config["target"] == "file":
            path = engine.exports / rid / step.config["path"]
            head = path.read_text(encoding="utf-8").splitlines(keepends=True)
            text = view.export["text"]
            assert "".join(head[: len(text.splitlines())]) == text, where
        if step.type == "export" and step.config["target"] == "table":
            table = engine.table_rows(step.config["table"], rid, step.name)
            assert len(table) == view.records_out, where
            for row in view.export["rows"]:
                stored = table[row["record_key"]]
                assert _json({c: stored[c] for c in row}) == _json(row), where


def preview_of(engine: Engine, plan: dict, records: int = MAX_RECORDS) -> PlanPreview:
    return preview_plan(
        parse_plan(plan),
        data_dir=engine.data,
        export_dir=engine.exports,
        records=records,
        sandbox_connect=lambda: psycopg2.connect(engine.db_url),
    )


@pytest.fixture
def engine(db_url: str, tmp_path: Path):
    e = Engine(db_url, tmp_path)
    yield e
    e.close()


@pytest.mark.parametrize("name", ["demo.json", "customers.json"])
@pytest.mark.parametrize("mode", ["reject", "stop"])
def test_fixture_plans_preview_equals_run(engine: Engine, name: str, mode: str) -> None:
    for f in FIXTURES.glob("*.*"):
        shutil.copy(f, engine.data / f.name)
    plan = json.loads((FIXTURES / "plans" / name).read_text())["plan"]
    plan["on_row_error"] = mode
    rid = engine.run(plan)
    preview = preview_of(engine, plan)
    assert_same(engine, rid, plan, preview)
    statuses = {s.status for s in preview.steps}
    assert statuses == ({"ok"} if mode == "reject" else {"failed", "upstream_failed"})


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_fixtures_preview_equals_run(engine: Engine, fmt: str) -> None:
    shutil.copy(FIXTURES / f"customers.{fmt}", engine.data / f"customers.{fmt}")
    plan = {
        "on_row_error": "reject",
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": f"customers.{fmt}", "format": fmt}},
            {"name": "dates", "type": "transform", "depends_on": ["read"],
             "config": {"op": "parse_date", "column": "signup"}},
            {"name": "by_status", "type": "transform", "depends_on": ["dates"],
             "config": {"op": "aggregate", "column": "amount", "group_by": ["status"]}},
            {"name": "out", "type": "export", "depends_on": ["by_status"],
             "config": {"target": "file", "path": "by_status.csv", "format": "csv"}},
        ],
    }  # fmt: skip
    rid = engine.run(plan)
    assert_same(engine, rid, plan, preview_of(engine, plan))


def test_a_preview_of_fewer_records_types_them_as_the_whole_input_does(engine: Engine) -> None:
    """Inference looks at every value of the input, in a run and in a preview that reads 100
    records: a value in the third batch (record 1,000) decides the type in both, and no
    record of the run is rejected for it."""
    lines = ["id,code"] + [f"{i},{i if i != 1000 else 'x1000'}" for i in range(1, 1201)]
    (engine.data / "big.csv").write_text("\n".join(lines) + "\n")
    plan = {
        "on_row_error": "reject",
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "big.csv", "format": "csv"}},
            {"name": "keep", "type": "transform", "depends_on": ["read"],
             "config": {"op": "filter_eq", "column": "code", "value": "7"}},
        ],
    }  # fmt: skip
    rid = engine.run(plan)
    ran = engine.steps(rid)
    preview = preview_of(engine, plan, records=100)
    read, keep = preview.steps
    assert read.columns == ran["read"]["columns"] == {"id": "int", "code": "string"}
    assert ran["read"]["rejected"] == 0
    assert read.inferred["code"].startswith("string: 'x1000' at line 1001 is not an int64")
    assert read.inferred["id"] == "int: all 1,200 value(s) are int64"
    assert (read.records_in, read.records_out) == (100, 100)
    assert read.sample == ran["read"]["first_rows"][:SAMPLE_ROWS]
    assert (keep.records_in, keep.records_out, keep.sample) == (100, 1, [{"id": 7, "code": "7"}])


def test_keys_repeating_across_batches_are_rejected_alike(engine: Engine) -> None:
    """1,200 records (three engine batches) whose keys repeat 700 records later: the table
    export refuses the repeats in staging, the preview in its screening, identically."""
    lines = ["id,name"] + [f"{i % 700},n{i}" for i in range(1, 1201)]
    (engine.data / "repeat.csv").write_text("\n".join(lines) + "\n")
    plan = {
        "on_row_error": "reject",
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "repeat.csv", "format": "csv"}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "table", "table": "repeat", "key": "id"}},
        ],
    }  # fmt: skip
    rid = engine.run(plan)
    preview = preview_of(engine, plan, records=1200)
    assert_same(engine, rid, plan, preview)
    out = preview.steps[1]
    assert (out.records_in, out.records_out, out.rejected) == (1200, 700, 500)
    assert "an earlier batch" in out.row_errors[0]["reason"]


# --- generated CSV ---------------------------------------------------------------------------

_TEXT = st.text(alphabet=st.sampled_from(list('ab ,"\n\t-1')), max_size=8)
_CODE = st.one_of(
    st.sampled_from(["A", "I", "x", "", "2024-01-05", "2024-02-30"]),
    st.integers(-3, 3).map(str),
)
_ROW = st.tuples(st.one_of(st.none(), st.integers(0, 25)), _TEXT, _CODE, _CODE)


def _csv_text(rows: list[tuple]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "name", "code", "day"])
    w.writerows(rows)
    return buf.getvalue()


def _generated_plan(path: str, table: str, mode: str, declare_id: bool) -> dict:
    columns = {"id": "int"} if declare_id else {}
    return {
        "on_failure": "continue_independent",
        "on_row_error": mode,
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": path, "format": "csv", "columns": columns}},
            {"name": "clean", "type": "transform", "depends_on": ["read"],
             "config": {"op": "normalize_whitespace", "columns": ["name"]}},
            {"name": "label", "type": "transform", "depends_on": ["clean"],
             "config": {"op": "map", "column": "code", "mapping": {"A": "yes", "1": "yes"},
                        "into": "label", "default": "no"}},
            {"name": "yes", "type": "transform", "depends_on": ["label"],
             "config": {"op": "filter_eq", "column": "label", "value": "yes"}},
            {"name": "to_table", "type": "export", "depends_on": ["yes"],
             "config": {"target": "table", "table": table, "key": "id"}},
            {"name": "dates", "type": "transform", "depends_on": ["clean"],
             "config": {"op": "parse_date", "column": "day"}},
            {"name": "by_code", "type": "transform", "depends_on": ["clean"],
             "config": {"op": "aggregate", "column": "id", "group_by": ["code"]}},
            {"name": "to_file", "type": "export", "depends_on": ["by_code"],
             "config": {"target": "file", "path": f"{table}.csv", "format": "csv"}},
        ],
    }  # fmt: skip


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(_ROW, max_size=40),
    mode=st.sampled_from(["reject", "stop"]),
    declare_id=st.booleans(),
)
def test_generated_csv_preview_equals_run(
    engine: Engine, rows: list[tuple], mode: str, declare_id: bool
) -> None:
    name = f"g{uuid.uuid4().hex[:12]}"
    (engine.data / f"{name}.csv").write_text(_csv_text(rows), encoding="utf-8")
    plan = _generated_plan(f"{name}.csv", name, mode, declare_id)
    rid = engine.run(plan)
    assert_same(engine, rid, plan, preview_of(engine, plan))
