"""The run table of `etl runs show` / `watch` at 80 columns: long step names that share a
prefix stay distinguishable, and every step says how long it took or has been running."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich.console import Console

from service.client.watch import RateMeter, plain_line, run_header, step_lines, table

PREFIX = "normalise_customer_addresses_of_region_"


def _run(*names: str) -> dict:
    steps = [{"name": n, "type": "transform", "status": "succeeded", "records_in": 12_345,
              "records_out": 12_345, "attempts": [{"executor": "executor-1:boot"}],
              "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:02Z"}
             for n in names]  # fmt: skip
    return {"id": "8d0c5c7e-6f1e-4a4e-9a53-7d3c2b1a0f00", "status": "succeeded", "steps": steps}


NOW = datetime(2026, 1, 1, 0, 12, 3, tzinfo=UTC)  # the server's clock, as the client saw it


def _rendered(run: dict, width: int) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    console.print(table(run, step_lines(run, {}, RateMeter(), NOW), console.width, NOW))
    return out.getvalue().splitlines()


def test_long_names_sharing_a_prefix_print_distinctly_at_80_columns() -> None:
    names = [f"{PREFIX}north_east", f"{PREFIX}north_west", f"{PREFIX}south", "load"]
    lines = _rendered(_run(*names), 80)
    assert all(len(line) <= 80 for line in lines)
    rows = [line.split("\u2502") for line in lines if "12345/12345" in line]
    cells = [row[1].strip() for row in rows]
    assert len(cells) == 4 and len(set(cells)) == 4, cells
    assert cells[3] == "load"  # a name that fits stays whole
    assert cells[0].endswith("east") and cells[1].endswith("west")
    assert "succeeded" in lines[-2] and "12345/12345" in lines[-2]  # the other cells whole
    assert all("2.0 s" in [c.strip() for c in row] for row in rows), rows  # the durations


def test_a_running_step_and_run_say_how_long_they_have_been_running_at_80_columns() -> None:
    names = [f"{PREFIX}north_east", f"{PREFIX}north_west", "load"]
    run = _run(*names)
    run.update(status="running", started_at="2026-01-01T00:00:00Z")
    run["steps"][1].update(status="running", finished_at=None)
    run["steps"][2].update(status="pending", started_at=None, finished_at=None)
    lines = _rendered(run, 80)
    assert lines[0].startswith(f"run {run['id']} running (running for 12 min 03 s)")
    assert all(len(line) <= 80 for line in lines)
    rows = {row[1].strip(): [c.strip() for c in row[2:]]
            for row in (line.split("\u2502") for line in lines) if len(row) > 3}  # fmt: skip
    assert len(rows) == 3, lines  # three steps, their names distinct
    assert "duration" in lines[2]  # the column's heading
    by_state = {cells[0]: cells[1] for cells in rows.values()}
    assert by_state == {"succeeded": "2.0 s", "running": "12 min 03 s", "pending": "-"}


def test_plain_lines_and_the_header_say_took_or_running_for() -> None:
    run = _run("read", "save")
    run.update(started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:00:04.25Z")
    run["steps"][1].update(status="running", finished_at=None)
    read, save = step_lines(run, {}, RateMeter(), NOW)
    assert plain_line(read).endswith("  took 2.0 s")
    assert plain_line(save).endswith("  running for 12 min 03 s")
    assert run_header(run, NOW) == f"run {run['id']} succeeded (took 4.2 s)"
    assert run_header(run) == f"run {run['id']} succeeded"  # what `watch` compares, unchanged
    run.update(status="queued", started_at=None, finished_at=None, queue_position=2)
    assert run_header(run, NOW) == f"run {run['id']} queued (queue position 2)"


def test_a_wide_terminal_shows_whole_names() -> None:
    names = [f"{PREFIX}north_east", f"{PREFIX}north_west"]
    cells = [
        line.split("\u2502")[1].strip()
        for line in _rendered(_run(*names), 200)
        if "executor-1" in line
    ]  # fmt: skip (every column shows)
    assert cells == names


def test_a_step_line_counts_records_out_and_rejected_apart_from_records_in() -> None:
    """A filter keeping 17 of 37 says so (not only `37/37`); rejects are counted."""
    run = _run("read", "active")
    run["steps"][0].update(type="ingest", records_in=40, records_out=37, rejected=3)
    run["steps"][1].update(records_in=37, records_out=17)
    read, active = step_lines(run, {"active": ["read"]}, RateMeter(), NOW)
    assert plain_line(read).split()[2:8] == ["records", "40/40", "out", "37", "rejected", "3"]
    assert plain_line(active).split()[2:6] == ["records", "37/37", "out", "17"]
    assert "rejected" not in plain_line(active)
    lines = _rendered(run, 120)
    assert [c.strip() for c in lines[2].split("\u2503")[6:8]] == ["out", "rejected"]
    cells = [[c.strip() for c in ln.split("\u2502")] for ln in lines if "/4" in ln or "/37" in ln]
    assert [c[6:8] for c in cells] == [["37", "3"], ["17", "0"]]


def test_a_fused_step_that_never_ran_shows_no_attempt_of_its_own() -> None:
    """Fused into `read`, which failed: `clean` ended upstream_failed with its share of the
    attempt released; it did not run, so no attempt, executor or duration is its own."""
    run = _run("read", "clean")
    run["steps"][0].update(
        status="failed",
        attempts=[
            {"number": 1, "executor": "executor-2:b", "outcome": "failed", "fused_into": None}
        ],
    )
    run["steps"][1].update(
        status="upstream_failed",
        started_at=None,
        finished_at=None,
        records_in=0,
        attempts=[
            {"number": 1, "executor": "executor-2:b", "outcome": "released", "fused_into": "read"}
        ],
    )
    read, clean = step_lines(run, {"clean": ["read"]}, RateMeter(), NOW)
    assert (read.attempts, read.executor) == (1, "executor-2")
    assert (clean.attempts, clean.executor) == (0, "")
    assert "attempts 0  executor -" in plain_line(clean)
