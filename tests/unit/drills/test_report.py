"""The drill report's peak-memory table: per process for the local topology, per container
(from the cgroup) for the compose drill."""

from __future__ import annotations

from drills.report import DrillResult, render_markdown


def _doc(memory: list[dict]) -> dict:
    res = DrillResult("x", "etl drill x", {"A": "1"})
    res.check("a check", True, "got")
    res.finish(memory)
    return {"generated_at": "2026-12-02T00:00:00Z", "drills": {"x": res.as_dict()}}


def test_processes_get_the_proc_table():
    text = render_markdown(_doc([{"process": "executor-1 #1", "pid": 7, "peak_rss_mib": 41.5,
                                  "peak_anon_mib": 30.0}]))  # fmt: skip
    assert "from /proc/PID/status" in text
    assert "| executor-1 #1 | 7 | 41.5 | 30.0 |" in text


def test_containers_get_the_cgroup_table_with_their_limit():
    text = render_markdown(_doc([{"container": "executor-1", "limit_mib": 512.0,
                                  "peak_rss_mib": 22.2, "peak_usage_mib": 60.1}]))  # fmt: skip
    assert "Peak memory per container, from its cgroup" in text
    assert "| container | limit MiB | peak RSS MiB | peak usage with page cache MiB |" in text
    assert "| executor-1 | 512.0 | 22.2 | 60.1 |" in text
    assert "/proc/PID/status" not in text
