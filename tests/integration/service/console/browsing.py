"""What the console's browser tests share beyond test_browser.py's fixtures: reading the
drawn DAG back from its SVG, and axe-core (pinned, checked by its sha256) run on a page."""

from __future__ import annotations

import hashlib
from pathlib import Path

from playwright.sync_api import Page

AXE = Path(__file__).with_name("vendor") / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"  # 4.14.1

# The drawn graph as the browser sees it: the canvas (viewBox and size), each box in SVG user
# units, each edge sampled every 2 px along its path (getPointAtLength, so whatever the path's
# commands) with its exact first and last points, its length and whether it is painted at all.
DAG_GEOMETRY = """svg => {
  const vb = svg.viewBox.baseVal;
  const canvas = {x: vb.x, y: vb.y, w: vb.width, h: vb.height,
                  width: svg.width.baseVal.value, height: svg.height.baseVal.value};
  const boxes = [...svg.querySelectorAll('g.node')].map(g => {
    const m = g.transform.baseVal.consolidate().matrix, r = g.querySelector('rect.box');
    const name = g.querySelector('text.name');
    return {step: g.dataset.step, x: m.e, y: m.f,
            w: r.width.baseVal.value, h: r.height.baseVal.value,
            text_right: name.x.baseVal[0].value + name.getComputedTextLength()};
  });
  const edges = [...svg.querySelectorAll('path.edge')].map(p => {
    const length = p.getTotalLength(), points = [], style = getComputedStyle(p);
    for (let at = 0; at <= length; at += 2) {
      const q = p.getPointAtLength(at); points.push([q.x, q.y]);
    }
    const first = p.getPointAtLength(0), last = p.getPointAtLength(length);
    return {src: p.dataset.from, dst: p.dataset.to, length, points,
            start: [first.x, first.y], end: [last.x, last.y],
            painted: style.stroke !== 'none' && style.visibility !== 'hidden'
                     && Number(style.opacity) > 0 && parseFloat(style.strokeWidth) > 0};
  });
  return {canvas, boxes, edges};
}"""


AXE_RUN = """() => axe.run(document).then(r => r.violations.map(v => ({
  id: v.id, impact: v.impact, help: v.help,
  nodes: v.nodes.map(n => n.target.join(' ') + ': ' + n.failureSummary.replace(/\\n/g, ' '))})))"""


PORT_PX = 3  # how far an edge's end may be from its box's side and still touch it


def assert_dag_readable(page: Page, plan: dict, where: str) -> None:
    """The page's DAG draws every dependency of `plan` as a painted path of non-zero length
    that starts on its source box's right side and ends on its target box's left side (a
    port: within PORT_PX of the side, between its corners), stays on the canvas (the SVG's
    viewBox, which is its size: nothing clipped), passes through no box (edges stop at their
    boxes' sides: not even their own ends' insides), with enough of it that no other edge
    covers; boxes do not overlap, lie on the canvas, and each box's name fits inside it."""
    page.wait_for_load_state("load")  # the stylesheet paints the edges
    geo = page.locator("svg.dag").evaluate(DAG_GEOMETRY)
    assert_geometry_readable(geo, plan, where)


def _on_side(point: list[float], x: float, box: dict) -> bool:
    """Whether `point` touches the vertical side at `x` of `box`, between its corners."""
    px, py = point
    return abs(px - x) <= PORT_PX and box["y"] + 1 < py < box["y"] + box["h"] - 1


def assert_geometry_readable(geo: dict, plan: dict, where: str) -> None:
    """`assert_dag_readable` on geometry read back by DAG_GEOMETRY."""
    canvas = geo["canvas"]
    assert (canvas["x"], canvas["y"], canvas["w"], canvas["h"]) == (
        0, 0, canvas["width"], canvas["height"]
    ), f"{where}: the viewBox {canvas} is not the SVG's own size"  # fmt: skip

    def on_canvas(x: float, y: float) -> bool:
        return -0.5 <= x <= canvas["w"] + 0.5 and -0.5 <= y <= canvas["h"] + 0.5

    wanted = sorted((d, s["name"]) for s in plan["steps"] for d in s.get("depends_on", []))
    assert sorted((e["src"], e["dst"]) for e in geo["edges"]) == wanted, where
    assert sorted(b["step"] for b in geo["boxes"]) == sorted(s["name"] for s in plan["steps"])
    boxes = geo["boxes"]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = (a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"]
                     or a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"])  # fmt: skip
            assert apart, f"{where}: boxes {a['step']} and {b['step']} overlap"
        assert a["text_right"] <= a["w"] - 4, f"{where}: the name of {a['step']} overflows its box"
        assert on_canvas(a["x"], a["y"]) and on_canvas(a["x"] + a["w"], a["y"] + a["h"]), (
            f"{where}: the box of {a['step']} is clipped by the canvas {canvas}"
        )
    by_step = {b["step"]: b for b in boxes}
    cells: dict[tuple[int, int], set[tuple[str, str]]] = {}
    for e in geo["edges"]:
        name = (e["src"], e["dst"])
        assert e["painted"] and e["length"] > 10, f"{where}: edge {name} is not drawn"
        src, dst = by_step[e["src"]], by_step[e["dst"]]
        assert _on_side(e["start"], src["x"] + src["w"], src), (
            f"{where}: edge {name} starts at {e['start']}, not on the right side of {e['src']}"
        )
        assert _on_side(e["end"], dst["x"], dst), (
            f"{where}: edge {name} ends at {e['end']}, not on the left side of {e['dst']}"
        )
        off = [(x, y) for x, y in [*e["points"], e["end"]] if not on_canvas(x, y)]
        assert not off, f"{where}: edge {name} leaves the canvas {canvas} at {off[0]}"
        for x, y in e["points"]:
            inside = [b["step"] for b in boxes
                      if b["x"] + 0.5 < x < b["x"] + b["w"] - 0.5
                      and b["y"] + 0.5 < y < b["y"] + b["h"] - 0.5]  # fmt: skip
            assert not inside, f"{where}: edge {name} crosses the box of {inside} at {x},{y}"
            cells.setdefault((int(x // 3), int(y // 3)), set()).add(name)
    for e in geo["edges"]:
        name = (e["src"], e["dst"])
        own = {(int(x // 3), int(y // 3)) for x, y in e["points"]}
        free = [c for c in own if cells[c] == {name}]
        assert len(free) >= 5, f"{where}: edge {name} is hidden behind other edges"


def axe_source() -> str:
    """axe-core's script, refused unless it is the pinned file."""
    text = AXE.read_bytes()
    assert hashlib.sha256(text).hexdigest() == AXE_SHA256, f"{AXE} is not the pinned axe-core"
    return text.decode("utf-8")


def axe_violations(page: Page) -> list[str]:
    """axe-core's violations on the page as it is now (WCAG 2.x A/AA and best practices),
    one readable line per failing node."""
    page.wait_for_load_state("load")  # styles applied: contrast is judged on the real page
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source())  # evaluated, not a <script> tag: the CSP forbids those
    found = page.evaluate(AXE_RUN)
    return [f"{v['id']} ({v['impact']}): {v['help']} at {n}" for v in found for n in v["nodes"]]
