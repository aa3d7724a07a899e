"""Pure layouts for the console's SVG: the plan's DAG (a layered, Sugiyama layout by
grandalf, left to right) and the attempts timeline (Gantt). Plain values in, coordinates out;
no I/O, no HTML (templates draw them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from grandalf.graphs import Edge as GEdge
from grandalf.graphs import Vertex, graph_core
from grandalf.layouts import SugiyamaLayout

from dag import AttemptOutcome, StepStatus
from dag.labels import distinct_labels

NODE_W, NODE_H = 190, 64
COL_GAP, ROW_GAP, MARGIN = 80, 18, 16
LANE = 10  # the room a long edge takes where it crosses a column (grandalf's dummy vertex)
COMPONENT_GAP = 36  # between the drawings of unconnected parts of a plan
NAME_CHARS = 20  # a longer name is shortened (distinctly); the full one is in the node's <title>
LAYOUT_CACHE = 256  # plans laid out kept in memory: the run page asks again every second

GANTT_LABEL_W, GANTT_BAR_W, GANTT_ROW_H, GANTT_AXIS_H = 200, 760, 26, 24
LABEL_CHAR_PX = 6.5  # the width of an 11 px system-ui character, with room to spare

# Attempt outcomes after which a new attempt is a takeover, not a retry after a delay.
_TAKEOVERS = {
    AttemptOutcome.LEASE_EXPIRED: "taken over",
    AttemptOutcome.RELEASED: "handed over",
    AttemptOutcome.SUPERSEDED: "replaced",
}


@dataclass(frozen=True)
class Node:
    """A step's box: top-left corner, depth (column) and the label to print."""

    name: str
    type: str
    depth: int
    x: int
    y: int
    label: str


@dataclass(frozen=True)
class Edge:
    """A `depends_on` arrow from `src` to `dst` as an SVG path."""

    src: str
    dst: str
    d: str


@dataclass(frozen=True)
class DagLayout:
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)


class _Box:
    """What grandalf reads of a vertex: its extent across the layer (`w`), along it (`h`),
    and where it put the centre (`xy`). The layout runs top-down; the console turns it to
    left-to-right, so a step's height is grandalf's width."""

    def __init__(self, w: float, h: float):
        self.w, self.h = w, h
        self.xy = (0.0, 0.0)


def step_depths(steps: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each step's depth: 0 without dependencies, else 1 + the deepest dependency. Unknown
    dependencies are ignored; a cycle (never in a validated plan) stops growing at len(steps)."""
    names = [str(s.get("name")) for s in steps]
    known = set(names)
    deps = {
        str(s.get("name")): [str(d) for d in s.get("depends_on") or [] if d in known] for s in steps
    }
    depth = dict.fromkeys(names, 0)
    for _ in range(len(names)):
        changed = False
        for n in names:
            want = max((depth[d] + 1 for d in deps[n]), default=0)
            if want != depth[n] and want <= len(names):
                depth[n], changed = want, True
        if not changed:
            break
    return depth


def _plan_key(steps: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """What the drawing depends on, hashable: names, types and known dependencies in order."""
    names = {str(s.get("name")) for s in steps}
    return tuple(
        (
            str(s.get("name")),
            str(s.get("type")),
            tuple(dict.fromkeys(str(d) for d in s.get("depends_on") or [] if str(d) in names)),
        )
        for s in steps
    )


def layout_dag(steps: Sequence[Mapping[str, Any]]) -> DagLayout:
    """The plan drawn left to right in columns by depth, laid out by grandalf's Sugiyama
    layout (layering, crossing reduction, Brandes-Koepf placement). A dependency spanning
    several columns is routed through the lane grandalf keeps free for it in each column it
    crosses (a dummy vertex), so no edge runs through a box; between columns, edges are
    curves that stay inside the gap. Boxes keep their size whatever the step count: a big
    plan scrolls instead of shrinking into unreadable text."""
    return _layout(_plan_key(steps))


@lru_cache(maxsize=LAYOUT_CACHE)
def _layout(plan: tuple[tuple[str, str, tuple[str, ...]], ...]) -> DagLayout:
    if not plan:
        return DagLayout([], [], 2 * MARGIN + NODE_W, 2 * MARGIN + NODE_H)
    vertices = {name: Vertex(name) for name, _, _ in plan}
    for v in vertices.values():
        v.view = _Box(NODE_H, NODE_W)
    rank: dict[str, int] = {}
    centre: dict[str, float] = {}  # vertical centre of each step's box
    lanes: dict[tuple[str, str], list[float]] = {}  # long edge -> its lane (y) in each column
    top = float(MARGIN)
    for names, deps in _components(plan):
        edges = [GEdge(vertices[d], vertices[n]) for n, d in deps]
        part = graph_core([vertices[n] for n in names], edges)
        sug = SugiyamaLayout(part)
        sug.xspace, sug.dw = ROW_GAP, LANE
        sug.init_all(roots=[v for v in part.sV if not v.e_in()])
        sug.draw()
        low = min(v.view.xy[0] - v.view.w / 2 for layer in sug.layers for v in layer)
        high = max(v.view.xy[0] + v.view.w / 2 for layer in sug.layers for v in layer)
        for v in part.sV:
            rank[v.data] = sug.grx[v].rank
            centre[v.data] = top + v.view.xy[0] - low
        for e, ctrl in sug.ctrls.items():
            src, dst = e.v
            r0, r1 = sug.grx[src].rank, sug.grx[dst].rank
            lanes[(src.data, dst.data)] = [
                top + ctrl[r].view.xy[0] - low for r in range(r0 + 1, r1)
            ]
        top += high - low + COMPONENT_GAP
    labels = distinct_labels([name for name, _, _ in plan], NAME_CHARS)
    nodes = [
        Node(name, type_, rank[name], _column_x(rank[name]), round(centre[name] - NODE_H / 2),
             labels[name])
        for name, type_, _ in plan
    ]  # fmt: skip
    edges = _route(plan, rank, centre, lanes)
    width = 2 * MARGIN + (max(rank.values()) + 1) * NODE_W + max(rank.values()) * COL_GAP
    height = round(top - COMPONENT_GAP + MARGIN)
    return DagLayout(nodes, edges, width, height)


def _components(
    plan: tuple[tuple[str, str, tuple[str, ...]], ...],
) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """The plan's connected parts in plan order: their step names and (step, dependency)
    pairs. Built here, in order, rather than by grandalf's `Graph`, which gathers edges in a
    set: the drawing would then differ from one process to the next (two gunicorn workers
    would draw one plan two ways)."""
    index = {name: i for i, (name, _, _) in enumerate(plan)}
    root = {name: name for name in index}  # union-find: each part's first step in the plan

    def find(name: str) -> str:
        while root[name] != name:
            name = root[name]
        return name

    for name, _, deps in plan:
        for dep in deps:
            first, later = sorted((find(name), find(dep)), key=index.__getitem__)
            root[later] = first
    groups: dict[str, tuple[list[str], list[tuple[str, str]]]] = {}
    for name, _, deps in plan:
        names, pairs = groups.setdefault(find(name), ([], []))
        names.append(name)
        pairs += [(name, d) for d in deps]
    return list(groups.values())


def _column_x(rank: int) -> int:
    return MARGIN + rank * (NODE_W + COL_GAP)


def _route(
    plan: tuple[tuple[str, str, tuple[str, ...]], ...],
    rank: Mapping[str, int],
    centre: Mapping[str, float],
    lanes: Mapping[tuple[str, str], list[float]],
) -> list[Edge]:
    """Each dependency as an SVG path: out of its source's right side, through its lanes
    (a straight run across each column it spans), into its target's left side. Edges leaving
    (entering) one box get their own ports, spread along the side in the order of where they
    go (come from), so a fan-out never draws two arrows on top of each other."""
    pairs = [(dep, name) for name, _, deps in plan for dep in deps]
    first_y = {p: (lanes.get(p) or [centre[p[1]]])[0] for p in pairs}
    last_y = {p: (lanes.get(p) or [centre[p[0]]])[-1] for p in pairs}
    out_port = _ports(pairs, 0, first_y, centre)
    in_port = _ports(pairs, 1, last_y, centre)
    edges = []
    for src, dst in pairs:
        x = _column_x(rank[src]) + NODE_W
        y = out_port[(src, dst)]
        d = [f"M{x},{y:.1f}"]
        for lane in lanes.get((src, dst), []):
            d.append(_curve(x, y, x + COL_GAP, lane))
            x, y = x + COL_GAP + NODE_W, lane
            d.append(f"H{x}")
        d.append(_curve(x, y, _column_x(rank[dst]), in_port[(src, dst)]))
        edges.append(Edge(src, dst, " ".join(d)))
    return edges


def _ports(
    pairs: Sequence[tuple[str, str]],
    end: int,
    toward: Mapping[tuple[str, str], float],
    centre: Mapping[str, float],
) -> dict[tuple[str, str], float]:
    """The y where each edge meets the box at its `end` (0: source, 1: target): one port per
    edge, spread over the middle of the side, in the order of the y the edge heads to."""
    by_box: dict[str, list[tuple[str, str]]] = {}
    for p in pairs:
        by_box.setdefault(p[end], []).append(p)
    ports = {}
    for box, mine in by_box.items():
        mine.sort(key=lambda p: toward[p])
        span = NODE_H - 24
        for i, p in enumerate(mine):
            offset = span * (i + 1) / (len(mine) + 1) - span / 2 if len(mine) > 1 else 0.0
            ports[p] = centre[box] + offset
    return ports


def _curve(x1: float, y1: float, x2: float, y2: float) -> str:
    """A cubic from (x1, y1) to (x2, y2) with horizontal tangents: its control points lie
    between x1 and x2, so the curve never leaves the gap between two columns."""
    if abs(y1 - y2) < 0.05:
        return f"H{x2}"
    mid = (x1 + x2) / 2
    return f"C{mid},{y1:.1f} {mid},{y2:.1f} {x2},{y2:.1f}"


@dataclass(frozen=True)
class Bar:
    """One attempt on the timeline: its row, x/width in px, and what to print beside it."""

    step: str
    number: int
    executor: str | None
    outcome: str | None  # None: still running
    y: int
    x: int
    w: int
    label: str
    gap_x: int | None = None  # where the previous attempt of the step ended (the delay line)
    gap_label: str | None = None
    first_of_step: bool = False

    def label_place(self, width: int) -> tuple[int, str, bool]:
        """Where the label is drawn on a timeline `width` px wide, never over the step
        names' column: (x, SVG text-anchor, inside the bar). Right of the bar when it fits
        before the end, else left of it when it fits after the names, else inside the bar
        from its start (a live run's bar reaches the end of the axis)."""
        text = self.label + (f" ({self.gap_label})" if self.gap_label else "")
        need = round(len(text) * LABEL_CHAR_PX)
        if self.x + self.w + 4 + need <= width:
            return self.x + self.w + 4, "start", False
        if self.x - 4 - need >= GANTT_LABEL_W:
            return self.x - 4, "end", False
        return self.x + 4, "start", True


@dataclass(frozen=True)
class Gantt:
    bars: list[Bar]
    ticks: list[tuple[int, str]] = field(default_factory=list)
    width: int = GANTT_LABEL_W + GANTT_BAR_W + 20
    height: int = GANTT_AXIS_H


def layout_gantt(
    attempts_by_step: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
    now: datetime,
    resumes: Sequence[datetime] = (),
) -> Gantt:
    """One row per started attempt, grouped by step in plan order, on one time axis from
    the first attempt's start to the last end (`now` for live attempts). Each bar's label
    names the executor and outcome; the gap before a step's next attempt is labelled as a
    retry delay, as a takeover after a lost lease or a release, or as a resume when one of
    `resumes` (when the run was resumed by hand) falls in it."""
    started = [a for _, attempts in attempts_by_step for a in attempts if a.get("started_at")]
    if not started:
        return Gantt([])
    t0 = min(a["started_at"] for a in started)
    t1 = max(max(a.get("finished_at") or now for a in started), t0)
    span_s = max((t1 - t0).total_seconds(), 1.0)
    scale = GANTT_BAR_W / span_s

    def px(t: datetime) -> int:
        return GANTT_LABEL_W + round((t - t0).total_seconds() * scale)

    bars: list[Bar] = []
    y = GANTT_AXIS_H
    for step, attempts in attempts_by_step:
        prev: Mapping[str, Any] | None = None
        first = True
        for a in attempts:
            if not a.get("started_at"):
                continue
            x0, x1 = px(a["started_at"]), px(a.get("finished_at") or now)
            executor = (a.get("executor") or "?").split(":")[0]
            outcome = a.get("outcome")
            shown = outcome or StepStatus.RUNNING
            secs = ((a.get("finished_at") or now) - a["started_at"]).total_seconds()
            label = f"#{a['number']} {executor} \u00b7 {shown} \u00b7 {secs:.1f} s"
            gap_label = _gap_label(prev, a, resumes)
            gap_x = px(prev["finished_at"]) if gap_label and prev else None
            bar = Bar(step, a["number"], executor, outcome, y, x0, max(x1 - x0, 3), label,
                      gap_x, gap_label, first)  # fmt: skip
            bars.append(bar)
            prev, first, y = a, False, y + GANTT_ROW_H
    ticks = []
    step_s = _tick_step(span_s)
    t = 0.0
    while t <= span_s + 1e-9:
        ticks.append((GANTT_LABEL_W + round(t * scale), f"+{t:g} s"))
        t += step_s
    return Gantt(bars, ticks, height=y + 6)


def _gap_label(
    prev: Mapping[str, Any] | None, attempt: Mapping[str, Any], resumes: Sequence[datetime]
) -> str | None:
    """What led from a step's previous attempt to `attempt`: a retry's delay, a takeover,
    or a resume by hand (one of `resumes` between them); None for a first attempt."""
    if prev is None or not prev.get("finished_at"):
        return None
    gap_s = (attempt["started_at"] - prev["finished_at"]).total_seconds()
    verb = _TAKEOVERS.get(prev.get("outcome") or "", "retry")
    if any(prev["finished_at"] <= r <= attempt["started_at"] for r in resumes):
        verb = "resumed by hand"
    return f"{verb} after {max(gap_s, 0):.1f} s"


def _tick_step(span_s: float) -> float:
    """A round tick spacing giving 4 to 10 ticks over `span_s`."""
    for step in (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600):
        if span_s / step <= 10:
            return float(step)
    return span_s / 10
