"""Reading reject files back (the console shows the first rejected rows of a step).

A reject file is JSON lines written by `fileexport.encode_rejects` and published only when the
step commits (`reject_file`); before that, or when a step rejected nothing, there is none."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectors.fileexport import reject_file

MAX_LINE_BYTES = 64 * 1024  # a huge raw record is cut for display, never read whole


@dataclass(frozen=True)
class RejectPreview:
    """The first rows of a step's reject file and where the file is (`exists` False: not
    published yet, or nothing was rejected)."""

    path: Path
    exists: bool
    rows: list[dict[str, Any]] = field(default_factory=list)


def read_rejects(reject_dir: Path, run_id: object, step_name: str, *, limit: int) -> RejectPreview:
    """Up to `limit` rejected rows (`line`, `record`, `column`, `reason`, `raw`) of a step's
    published reject file. A line that is not JSON (cut by `MAX_LINE_BYTES`) is shown as raw
    text rather than failing the page."""
    path = reject_file(reject_dir, run_id, step_name).final_path
    rows: list[dict[str, Any]] = []
    try:
        with open(path, "rb") as f:
            while len(rows) < limit:
                line = f.readline(MAX_LINE_BYTES)
                if not line:
                    break
                rows.append(_parse(line))
                if not line.endswith(b"\n"):  # cut: skip the rest of this record
                    f.readline()
    except FileNotFoundError:
        return RejectPreview(path=path, exists=False)
    return RejectPreview(path=path, exists=True, rows=rows)


def _parse(line: bytes) -> dict[str, Any]:
    text = line.decode("utf-8", errors="replace").rstrip("\n")
    try:
        row = json.loads(text)
    except ValueError:
        row = None
    if not isinstance(row, dict):
        return {"line": None, "record": None, "column": None, "reason": "unreadable", "raw": text}
    return row
