"""The console's pure layouts: the DAG (grandalf's layered layout and our edge routing) and
the attempts timeline."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
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
        (x0, y0), (x1, y1) = _points(e.d)[0], _points(e.d)[-1]
        assert x0 == src.x + NODE_W and src.y < y0 < src.y + NODE_H
        assert x1 == dst.x and dst.y < y1 < dst.y + NODE_H


def _points(d: str, step: float = 2.0) -> list[tuple[float, float]]:
    """Points along an SVG path of M, H and C commands (what `layout_dag` writes), about
    `step` px apart."""
    out: list[tuple[float, float]] = []
    x = y = 0.0
    for cmd, args in re.findall(r"([MHC])([^MHC]*)", d):
        nums = [float(v) for v in re.findall(r"-?[0-9.]+", args)]
        if cmd == "M":
            x, y = nums
            out.append((x, y))
        elif cmd == "H":
            n = max(int(abs(nums[0] - x) / step), 1)
            out += [(x + (nums[0] - x) * i / n, y) for i in range(1, n + 1)]
            x = nums[0]
        else:
            (ax, ay), (bx, by), (cx, cy) = zip(nums[::2], nums[1::2], strict=True)
            for i in range(1, 101):
                t = i / 100
                w = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t * t, t**3
                out.append((w[0] * x + w[1] * ax + w[2] * bx + w[3] * cx,
                            w[0] * y + w[1] * ay + w[2] * by + w[3] * cy))  # fmt: skip
            x, y = cx, cy
    return out


def _assert_readable(steps: list[dict]) -> None:
    """No edge point inside any box (its own ends included: edges stop at the sides), no two
    boxes overlapping, and every edge with points no other edge covers."""
    dag = layout_dag(steps)
    assert len(dag.edges) == sum(len(s["depends_on"]) for s in steps)
    boxes = [(n.x, n.y, n.x + NODE_W, n.y + NODE_H) for n in dag.nodes]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    points = {(e.src, e.dst): _points(e.d) for e in dag.edges}
    for edge, pts in points.items():
        for px, py in pts:
            inside = [
                b for b in boxes if b[0] + 0.5 < px < b[2] - 0.5 and b[1] + 0.5 < py < b[3] - 0.5
            ]
            assert not inside, (edge, (px, py), inside)
    cells: dict[tuple[int, int], set[tuple[str, str]]] = {}  # 3 px cells -> edges there
    for edge, pts in points.items():
        for px, py in pts:
            cells.setdefault((int(px // 3), int(py // 3)), set()).add(edge)
    for edge, pts in points.items():
        free = {(int(px // 3), int(py // 3)) for px, py in pts}
        free = {c for c in free if cells[c] == {edge}}
        assert len(free) >= 5, f"edge {edge} is hidden behind others"


def test_awkward_plans_draw_no_edge_through_a_box_and_hide_none() -> None:
    chain = [_step("read_csv"), _step("read_api"), _step("clean", "read_csv"),
             _step("enrich", "clean"), _step("join", "enrich", "read_api"),
             _step("both", "read_csv", "join"), _step("out", "both")]  # fmt: skip
    diamonds = [_step("a"), _step("b", "a"), _step("c", "a"), _step("d", "b", "c"),
                _step("e", "d"), _step("f", "d"), _step("g", "e", "f", "a")]  # fmt: skip
    for plan in (chain, diamonds):
        _assert_readable(plan)


def test_random_plans_draw_no_edge_through_a_box_and_hide_none() -> None:
    rng = random.Random(22)
    for _ in range(40):
        n = rng.randint(2, 30)
        steps = []
        for i in range(n):
            deps = rng.sample(range(i), k=min(i, rng.choice([0, 1, 1, 1, 2, 3]))) if i else []
            steps.append(_step(f"s{i}", *(f"s{d}" for d in deps)))
        _assert_readable(steps)


def test_unconnected_parts_of_a_plan_do_not_overlap() -> None:
    _assert_readable([_step("a"), _step("b", "a"), _step("c"), _step("d", "c"), _step("e")])


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
        assert len(n.label) <= 20
    assert "\u2026" in dag.node(steps[0]["name"]).label


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


def test_a_plan_is_drawn_the_same_way_by_every_process() -> None:
    code = (
        "import json, sys\n"
        "from service.console.graph import layout_dag\n"
        "steps = json.loads(sys.argv[1])\n"
        "print(repr(layout_dag(steps)))\n"
    )
    rng = random.Random(7)
    steps = [_step("s0")]
    for i in range(1, 16):
        steps.append(_step(f"s{i}", *(f"s{d}" for d in rng.sample(range(i), k=min(i, 2)))))
    drawn = {
        subprocess.run(
            [sys.executable, "-c", code, json.dumps(steps)],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True, text=True, check=True,
        ).stdout
        for seed in (1, 2, 3)
    }  # fmt: skip
    assert len(drawn) == 1  # two gunicorn workers never draw one plan two ways


def test_a_resume_by_hand_is_not_labelled_a_retry() -> None:
    failed = {"number": 1, "executor": "executor-1:b", "outcome": "failed",
              "started_at": T0, "finished_at": T0 + timedelta(seconds=1)}  # fmt: skip
    again = {"number": 2, "executor": "executor-2:b", "outcome": "succeeded",
             "started_at": T0 + timedelta(seconds=9),
             "finished_at": T0 + timedelta(seconds=10)}  # fmt: skip
    now = T0 + timedelta(seconds=11)
    resumed = layout_gantt([("s", [failed, again])], now, [T0 + timedelta(seconds=8)])
    assert resumed.bars[1].gap_label == "resumed by hand after 8.0 s"
    retried = layout_gantt([("s", [failed, again])], now, [T0 + timedelta(seconds=20)])
    assert retried.bars[1].gap_label == "retry after 8.0 s"
