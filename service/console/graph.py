"""Pure layouts for the console's SVG: the plan's DAG left to right by depth, and the attempts
timeline (Gantt). Plain values in, coordinates out; no I/O, no HTML (templates draw them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dag import AttemptOutcome, StepStatus

NODE_W, NODE_H = 190, 64
COL_GAP, ROW_GAP, MARGIN = 70, 18, 16
NAME_CHARS = 24  # a longer name is cut with an ellipsis; the full one is in the node's <title>

GANTT_LABEL_W, GANTT_BAR_W, GANTT_ROW_H, GANTT_AXIS_H = 200, 760, 26, 24

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


def short_label(name: str, limit: int = NAME_CHARS) -> str:
    """`name` cut to `limit` characters with an ellipsis."""
    return name if len(name) <= limit else name[: limit - 1] + "\u2026"


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


def layout_dag(steps: Sequence[Mapping[str, Any]]) -> DagLayout:
    """Columns by depth, left to right; inside a column, steps sorted by the mean row of
    their dependencies (fewer crossings), then plan order. Boxes keep their size whatever the
    step count: a big plan scrolls instead of shrinking into unreadable text."""
    depth = step_depths(steps)
    order = {str(s.get("name")): i for i, s in enumerate(steps)}
    row: dict[str, int] = {}
    columns: dict[int, list[Mapping[str, Any]]] = {}
    for s in steps:
        columns.setdefault(depth[str(s.get("name"))], []).append(s)
    for d in sorted(columns):

        def key(s: Mapping[str, Any]) -> tuple[float, int]:
            parents = [row[p] for p in s.get("depends_on") or [] if p in row]
            name = str(s.get("name"))
            return (sum(parents) / len(parents) if parents else order[name], order[name])

        for i, s in enumerate(sorted(columns[d], key=key)):
            row[str(s.get("name"))] = i
    nodes = []
    for s in steps:
        name = str(s.get("name"))
        x = MARGIN + depth[name] * (NODE_W + COL_GAP)
        y = MARGIN + row[name] * (NODE_H + ROW_GAP)
        nodes.append(Node(name, str(s.get("type")), depth[name], x, y, short_label(name)))
    by_name = {n.name: n for n in nodes}
    edges = []
    for s in steps:
        dst = by_name[str(s.get("name"))]
        for dep in s.get("depends_on") or []:
            src = by_name.get(str(dep))
            if src is None:
                continue
            x1, y1 = src.x + NODE_W, src.y + NODE_H // 2
            x2, y2 = dst.x, dst.y + NODE_H // 2
            mid = (x1 + x2) // 2
            edges.append(Edge(src.name, dst.name, f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"))
    max_depth = max(depth.values(), default=0)
    max_rows = max((len(c) for c in columns.values()), default=1)
    width = 2 * MARGIN + (max_depth + 1) * NODE_W + max_depth * COL_GAP
    height = 2 * MARGIN + max_rows * NODE_H + (max_rows - 1) * ROW_GAP
    return DagLayout(nodes, edges, width, height)


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


@dataclass(frozen=True)
class Gantt:
    bars: list[Bar]
    ticks: list[tuple[int, str]] = field(default_factory=list)
    width: int = GANTT_LABEL_W + GANTT_BAR_W + 20
    height: int = GANTT_AXIS_H


def layout_gantt(
    attempts_by_step: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], now: datetime
) -> Gantt:
    """One row per started attempt, grouped by step in plan order, on one time axis from
    the first attempt's start to the last end (`now` for live attempts). Each bar's label
    names the executor and outcome; the gap before a step's next attempt is labelled as a
    retry delay, or as a takeover after a lost lease or a release."""
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
            gap_x = gap_label = None
            if prev is not None and prev.get("finished_at"):
                gap_s = (a["started_at"] - prev["finished_at"]).total_seconds()
                verb = _TAKEOVERS.get(prev.get("outcome") or "", "retry")
                gap_x, gap_label = px(prev["finished_at"]), f"{verb} after {max(gap_s, 0):.1f} s"
            bars.append(
                Bar(
                    step,
                    a["number"],
                    executor,
                    outcome,
                    y,
                    x0,
                    max(x1 - x0, 3),
                    label,
                    gap_x,
                    gap_label,
                    first,
                )
            )
            prev, first, y = a, False, y + GANTT_ROW_H
    ticks = []
    step_s = _tick_step(span_s)
    t = 0.0
    while t <= span_s + 1e-9:
        ticks.append((GANTT_LABEL_W + round(t * scale), f"+{t:g} s"))
        t += step_s
    return Gantt(bars, ticks, height=y + 6)


def _tick_step(span_s: float) -> float:
    """A round tick spacing giving 4 to 10 ticks over `span_s`."""
    for step in (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600):
        if span_s / step <= 10:
            return float(step)
    return span_s / 10
