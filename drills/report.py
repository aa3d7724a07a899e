"""What a drill found and the report: `DrillResult` (checks, runs with their timings,
figures, peak memory) and `report.json` / `report.md` in the report directory."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from drills.harness import now_utc


def plain(value: Any) -> Any:
    """`value` with every `StrEnum` (a state) as its plain string, for the report's text."""
    if isinstance(value, StrEnum):
        return str(value)
    if isinstance(value, dict):
        return type(value)({plain(k): plain(v) for k, v in value.items()})
    if isinstance(value, list | tuple | set | frozenset):
        return type(value)(plain(v) for v in value)
    return value


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat(timespec="milliseconds")


def parse_ts(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value.replace("Z", "+00:00"))


def seconds(start: str | datetime | None, end: str | datetime | None) -> float | None:
    """`end - start` in seconds (ISO strings or datetimes), None if either is missing."""
    a = parse_ts(start) if isinstance(start, str) else start
    b = parse_ts(end) if isinstance(end, str) else end
    return None if a is None or b is None else round((b - a).total_seconds(), 3)


@dataclass
class DrillResult:
    """What one drill did and found: checks (each PASS/FAIL), runs, figures, peak memory."""

    name: str
    command: str
    env: dict[str, str]
    started_at: str = field(default_factory=lambda: iso(now_utc()) or "")
    finished_at: str | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    memory: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def check(self, name: str, passed: bool, detail: Any = "") -> bool:
        self.checks.append({"check": name, "passed": bool(passed), "detail": str(detail)[:500]})
        return bool(passed)

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.checks) and all(c["passed"] for c in self.checks)

    def expect(self, name: str, got: Any, want: Any) -> bool:
        """A check that `got == want`; the report shows what was got."""
        return self.check(f"{name}: {plain(want)}", got == want, plain(got))

    def add_run(self, label: str, run: dict) -> None:
        """Keep a run's ids and the timings of every step and attempt (API timestamps)."""
        steps = [
            {
                **_timed(s, "name", "status", "records_in", "records_out", "rejected"),
                "attempts": [_timed(a, "number", "executor", "outcome") for a in s["attempts"]],
            }
            for s in run.get("steps", [])
        ]
        ids = _timed(run, "id", "trace_id", "status", "created_at")
        self.runs.append({"label": label, **ids, "steps": steps})

    def finish(self, memory: list[dict[str, Any]]) -> None:
        self.memory, self.finished_at = memory, iso(now_utc())

    @property
    def duration_s(self) -> float | None:
        return seconds(self.started_at, self.finished_at)

    def as_dict(self) -> dict[str, Any]:
        verdict = "PASS" if self.passed else "FAIL"
        return {"verdict": verdict, "duration_s": self.duration_s, **asdict(self)}


def _timed(d: dict, *keys: str) -> dict[str, Any]:
    """`keys` of `d` plus its start/finish timestamps and the duration between them."""
    start, end = d.get("started_at"), d.get("finished_at")
    picked = {k: d.get(k) for k in keys}
    return {**picked, "started_at": start, "finished_at": end, "duration_s": seconds(start, end)}


def write_report(report_dir: Path, sections: list[dict[str, Any]], *, merge: bool) -> None:
    """Write `report.json` and `report.md`; with `merge`, keep the other drills' sections
    of an existing report and replace only these."""
    report_dir.mkdir(parents=True, exist_ok=True)
    path = report_dir / "report.json"
    drills = json.loads(path.read_text())["drills"] if merge and path.exists() else {}
    drills.update({s["name"]: s for s in sections})
    doc = {"generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "drills": drills}
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    (report_dir / "report.md").write_text(render_markdown(doc))


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    cell = lambda v: "" if v is None else str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def render_markdown(doc: dict[str, Any]) -> str:
    """The human-readable report: a summary table, then one section per drill."""
    drills = doc["drills"]
    out = ["# Failure drills report", "", f"Generated {doc['generated_at']}.", ""]
    summary = [[n, d["verdict"], d["duration_s"], f"`{d['command']}`"] for n, d in drills.items()]
    out += _table(["drill", "verdict", "duration s", "reproduce"], summary)
    for name, d in drills.items():
        env = " ".join(f"{k}={v}" for k, v in d["env"].items())
        window = f"{d['started_at']} .. {d['finished_at']} ({d['duration_s']} s)"
        out += ["", f"## {name}: {d['verdict']}", "", f"Reproduce: `{d['command']}`", ""]
        out += [f"Environment of its topology: `{env}`", "", f"Window: {window}", ""]
        out += [f"**Error:** `{d['error']}`", ""] if d.get("error") else []
        checks = [[c["check"], "PASS" if c["passed"] else "FAIL", c["detail"]] for c in d["checks"]]
        out += [*_table(["check", "verdict", "got"], checks), ""]
        out += [f"- {k}: `{json.dumps(v)}`" for k, v in d["figures"].items()]
        out += [f"- note: {n}" for n in d.get("notes", [])]
        for r in d["runs"]:
            times = f"created {r['created_at']}, started {r['started_at']}, finished"
            times += f" {r['finished_at']} ({r['duration_s']} s)"
            title = f"Run `{r['id']}` ({r['label']}): **{r['status']}**, trace id `{r['trace_id']}`"
            out += ["", f"{title}, {times}", ""]
            rows = [[s[k] for k in STEP_COLUMNS] + ["; ".join(map(_attempt, s["attempts"]))]
                    for s in r["steps"]]  # fmt: skip
            out += _table([*STEP_COLUMNS, "attempts"], rows)
        out += _memory(d["memory"])
    return "\n".join(out) + "\n"


def _memory(memory: list[dict[str, Any]]) -> list[str]:
    """The peak memory table: per process (from /proc) or per container (from its cgroup)."""
    if memory and "container" in memory[0]:
        head = "Peak memory per container, from its cgroup (resident anonymous memory; usage with"
        rows = [[m["container"], m["limit_mib"], m["peak_rss_mib"], m["peak_usage_mib"]]
                for m in memory]  # fmt: skip
        header = ["container", "limit MiB", "peak RSS MiB", "peak usage with page cache MiB"]
        return ["", head + " page cache), sampled every 250 ms:", "", *_table(header, rows)]
    head = "Peak memory, from /proc/PID/status (VmHWM; VmRSS, RssAnon every 200 ms):"
    rows = [[m["process"], m["pid"], m["peak_rss_mib"], m["peak_anon_mib"]] for m in memory]
    header = ["process", "pid", "peak RSS MiB", "peak private (anon) MiB"]
    return ["", head, "", *_table(header, rows)]


STEP_COLUMNS = ("name", "status", "started_at", "finished_at", "duration_s",
                "records_in", "records_out", "rejected")  # fmt: skip


def _attempt(a: dict) -> str:
    who = (a["executor"] or "-").split(":")[0]
    times = f"{a['started_at']}..{a['finished_at']} ({a['duration_s']} s)"
    return f"#{a['number']} {who} {a['outcome']} {times}"
