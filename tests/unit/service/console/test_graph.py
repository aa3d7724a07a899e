"""The console's pure layouts: the DAG by depth and the attempts timeline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from service.console.graph import NODE_H, NODE_W, layout_dag, layout_gantt, step_depths
from service.console.runview import step_progress

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _step(name: str, *deps: str) -> dict:
    return {"name": name, "type": "transform", "depends_on": list(deps)}


def test_depth_is_the_longest_path_from_a_root() -> None:
    steps = [_step("a"), _step("b", "a"), _step("c", "a", "b"), _step("d")]
    assert step_depths(steps) == {"a": 0, "b": 1, "c": 2, "d": 0}


def test_layout_runs_left_to_right_with_one_edge_per_dependency() -> None:
    steps = [_step("a"), _step("b", "a"), _step("c", "a", "b")]
    dag = layout_dag(steps)
    xs = {n.name: n.x for n in dag.nodes}
    assert xs["a"] < xs["b"] < xs["c"]
    assert sorted((e.src, e.dst) for e in dag.edges) == [("a", "b"), ("a", "c"), ("b", "c")]
    for e in dag.edges:  # each edge leaves its source's right side, enters its target's left
        src, dst = dag.node(e.src), dag.node(e.dst)
        assert e.d.startswith(f"M{src.x + NODE_W},{src.y + NODE_H // 2} ")
        assert e.d.endswith(f" {dst.x},{dst.y + NODE_H // 2}")


def test_thirty_steps_keep_full_size_boxes_that_never_overlap() -> None:
    steps = [_step("extract_customers_from_the_crm_export")]
    steps += [_step(f"s{i:02d}", steps[0]["name"]) for i in range(1, 25)]
    steps += [_step(f"t{i}", f"s{i:02d}") for i in range(1, 6)]
    dag = layout_dag(steps)
    assert len(dag.nodes) == 30 and len(dag.edges) == 29
    boxes = [(n.x, n.y) for n in dag.nodes]
    assert len(set(boxes)) == 30  # no two steps share a box
    for n in dag.nodes:
        assert n.x + NODE_W <= dag.width and n.y + NODE_H <= dag.height
        assert len(n.label) <= 24
    assert dag.node(steps[0]["name"]).label.endswith("\u2026")


def test_timeline_shows_a_takeover_after_a_lost_lease_and_a_retry_delay() -> None:
    out = [
        {"number": 1, "executor": "executor-1:boot", "outcome": "lease_expired",
         "started_at": T0, "finished_at": T0 + timedelta(seconds=4)},
        {"number": 2, "executor": "executor-2:boot", "outcome": None,
         "started_at": T0 + timedelta(seconds=4.5), "finished_at": None},
    ]  # fmt: skip
    flaky = [
        {"number": 1, "executor": "executor-2:b", "outcome": "failed",
         "started_at": T0, "finished_at": T0 + timedelta(seconds=1)},
        {"number": 2, "executor": "executor-1:b", "outcome": "succeeded",
         "started_at": T0 + timedelta(seconds=2), "finished_at": T0 + timedelta(seconds=3)},
    ]  # fmt: skip
    g = layout_gantt([("out", out), ("flaky", flaky), ("idle", [])], now=T0 + timedelta(seconds=10))
    assert [(b.step, b.number, b.executor, b.outcome) for b in g.bars] == [
        ("out", 1, "executor-1", "lease_expired"),
        ("out", 2, "executor-2", None),
        ("flaky", 1, "executor-2", "failed"),
        ("flaky", 2, "executor-1", "succeeded"),
    ]
    assert g.bars[1].gap_label == "taken over after 0.5 s" and "running" in g.bars[1].label
    assert g.bars[3].gap_label == "retry after 1.0 s"
    assert g.bars[1].x + g.bars[1].w == max(b.x + b.w for b in g.bars)  # live: drawn to now
    assert [b.first_of_step for b in g.bars] == [True, False, True, False]
    assert len({b.y for b in g.bars}) == 4


def test_timeline_of_a_run_without_started_attempts_is_empty() -> None:
    assert layout_gantt([("a", [{"number": 1, "started_at": None}])], now=T0).bars == []


def test_progress_of_a_file_ingest_and_of_the_steps_fused_with_it(tmp_path) -> None:
    (tmp_path / "x.csv").write_bytes(b"0123456789" * 10)
    read = {
        "name": "read", "type": "ingest", "status": "running", "depends_on": [],
        "config": {"source": "file", "path": "x.csv"},
        "checkpoint": {"position": {"offset": 25, "line": 3}, "n": 1},
    }  # fmt: skip
    clean = {**_step("clean", "read"), "status": "running", "records_in": 2}
    out = {**_step("out", "clean"), "status": "running", "records_in": 2}
    steps = {s["name"]: s for s in (read, clean, out)}
    assert step_progress(read, steps, tmp_path) == 0.25
    assert step_progress(out, steps, tmp_path) == 0.25  # fused: as far as the ingest
    steps["read"] = {**read, "status": "succeeded", "records_out": 8}
    steps["clean"] = {**clean, "status": "succeeded", "records_out": 8}
    assert step_progress(out, steps, tmp_path) == 0.25  # unfused: records in over out
