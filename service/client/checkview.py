"""A run's data check results as `etl runs show` prints them: one row per check of each
step that has results (plain values in, table rows out)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CHECK_HEADERS", "check_rows"]

CHECK_HEADERS = ["STEP", "CHECK", "OUTCOME", "FAILING", "MESSAGE", "FIRST EXAMPLE"]
EXAMPLE_CHARS = 80


def _described(result: dict[str, Any]) -> str:
    """`unique(id)`, `range(amount, min 0)`, `row_count(min 1000)`: the check in short."""
    args = []
    if "columns" in result:
        args.append(", ".join(result["columns"]))
    if "column" in result:
        args.append(result["column"])
    for key in ("values", "min", "max", "ratio"):
        if key in result:
            args.append(f"{key} {json.dumps(result[key], ensure_ascii=False)}")
    suffix = " [warn]" if result.get("severity") == "warn" else ""
    return f"{result.get('check')}({'; '.join(args)}){suffix}"


def _first_example(result: dict[str, Any]) -> str:
    """The first example of a failing check (line, record and values), cut to a cell; one
    from a glob ingest's file starts with `FILE:LINE`, so the cut spares where it is."""
    examples = result.get("examples") or []
    if not examples or result.get("outcome") == "passed":
        return ""
    example, where = examples[0], ""
    for file_key, line_key in (("file", "line"), ("first_file", "first_line")):
        if isinstance(example, dict) and file_key in example:
            example = {k: v for k, v in example.items() if k not in (file_key, line_key)}
            where = f"{examples[0][file_key]}:{examples[0].get(line_key, '')} "
    text = where + json.dumps(example, ensure_ascii=False, default=str)
    return text if len(text) <= EXAMPLE_CHARS else text[: EXAMPLE_CHARS - 1] + "…"


def check_rows(run: dict[str, Any]) -> list[list[Any]]:
    """The table rows of every step's check results, in plan order."""
    rows = []
    for step in run.get("steps", []):
        for result in step.get("checks") or []:
            rows.append(
                [
                    step.get("name"),
                    _described(result),
                    result.get("outcome"),
                    result.get("failing"),
                    result.get("message"),
                    _first_example(result),
                ]
            )
    return rows
