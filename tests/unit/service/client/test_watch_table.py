"""The run table of `etl runs show` / `watch` at 80 columns: long step names that share a
prefix stay distinguishable."""

from __future__ import annotations

import io

from rich.console import Console

from service.client.watch import RateMeter, step_lines, table

PREFIX = "normalise_customer_addresses_of_region_"


def _run(*names: str) -> dict:
    steps = [{"name": n, "type": "transform", "status": "succeeded", "records_in": 12_345,
              "records_out": 12_345, "attempts": [{"executor": "executor-1:boot"}],
              "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:02Z"}
             for n in names]  # fmt: skip
    return {"id": "8d0c5c7e-6f1e-4a4e-9a53-7d3c2b1a0f00", "status": "succeeded", "steps": steps}


def _rendered(run: dict, width: int) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    console.print(table(run, step_lines(run, {}, RateMeter()), console.width))
    return out.getvalue().splitlines()


def test_long_names_sharing_a_prefix_print_distinctly_at_80_columns() -> None:
    names = [f"{PREFIX}north_east", f"{PREFIX}north_west", f"{PREFIX}south", "load"]
    lines = _rendered(_run(*names), 80)
    assert all(len(line) <= 80 for line in lines)
    cells = [line.split("\u2502")[1].strip() for line in lines if "transform" in line]
    assert len(cells) == 4 and len(set(cells)) == 4, cells
    assert cells[3] == "load"  # a name that fits stays whole
    assert cells[0].endswith("east") and cells[1].endswith("west")
    assert "succeeded" in lines[-2] and "12345/12345" in lines[-2]  # the other cells whole


def test_a_wide_terminal_shows_whole_names() -> None:
    names = [f"{PREFIX}north_east", f"{PREFIX}north_west"]
    cells = [
        line.split("\u2502")[1].strip()
        for line in _rendered(_run(*names), 200)
        if "executor-1" in line
    ]  # fmt: skip (every column shows)
    assert cells == names
