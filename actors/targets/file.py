"""The `file` export target (`dag.targets.file`): a file under `ETL_EXPORT_DIR/<run_id>/`,
written in chunks keyed by batch number and published whole when the step commits
(`connectors.export_file`); its preview, lineage dataset, purge and run view."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import connectors
from actors.committer import StagedRows
from actors.datasets import Places, file_dataset
from actors.preview_bounds import kept
from actors.preview_exports import (
    COLUMN_TYPES_SCHEMA,
    PREVIEW_ROWS_SCHEMA,
    PREVIEW_RUN_ID,
    SAMPLE_ROWS,
    shown,
)
from actors.stepio import StepEnv
from actors.targets.target import Config, Removed, TargetImpl, ViewText
from dag import RowError, Step
from dag.targets.file import EXPORT_FORMATS


class FileSink:
    """An export to `ETL_EXPORT_DIR/<run_id>/<path>`, published when the step commits."""

    stages_in_commit = False  # a chunk is a file, written by `write`

    def __init__(self, step: Step, env: StepEnv, columns: dict[str, str]):
        self.format = step.config.get("format", "jsonl")
        self.columns = columns
        self.file = connectors.export_file(
            env.export_dir, env.run_id, step.name, step.config["path"]
        )

    def close(self) -> None:
        pass

    def start(self, *, fresh: bool, chunks: int = 0, records: int = 0) -> None:
        """Begin an attempt: from scratch (leftovers of an attempt that committed nothing
        go), or after `chunks` committed chunks (`ChunkMissing` if one is gone)."""
        if fresh:
            self.file.discard()
        else:
            self.file.staged(chunks)

    def defer(self, chunk: int, records: list[dict], first_ordinal: int) -> StagedRows | None:
        """Never: a chunk is a file, written by `write`."""
        return None

    def write(self, chunk: int, records: list[dict], first_ordinal: int) -> list[RowError]:
        if self.format == "csv":
            data = connectors.encode_csv(records, self.columns, header=chunk == 0)
        else:
            data = connectors.encode_jsonl(records)
        self.file.write_chunk(chunk, data)
        return []

    def discard(self) -> None:
        self.file.discard()

    def publish(self, chunks: int, records: int) -> str:
        """Publish the committed chunks, refusing (`StagedOutputLost`) a file that would hold
        another number of records than the step committed."""
        if chunks == 0 and self.format == "csv":  # an empty CSV export still has its header
            self.file.write_chunk(0, connectors.encode_csv([], self.columns, header=True))
            chunks = 1
        staged = self.file.staged(chunks)
        found = connectors.count_records(
            [self.file.final_path] if staged is None else staged, self.format
        )
        if found != records:
            raise connectors.StagedOutputLost(
                f"cannot publish {self.file.final_path}: its {chunks} chunk(s) hold {found}"
                f" record(s), the step committed {records}"
            )
        self.file.publish(chunks, staged)  # the chunks just counted: the logs read once
        return str(self.file.final_path)


class FileExportView:
    """What a file export would write: its path, columns and first lines."""

    def __init__(self, step: Step, env: StepEnv, columns: dict[str, str]):
        self.format = step.config.get("format", "jsonl")
        self.columns = columns
        chunked = connectors.export_file(
            env.export_dir, PREVIEW_RUN_ID, step.name, step.config["path"]
        )  # the engine's path checks (ExportPathRefused)
        path = str(chunked.final_path).replace(PREVIEW_RUN_ID, "<run_id>")
        self.view: dict[str, Any] = {
            "target": "file",
            "path": path,
            "format": self.format,
            "columns": dict(columns),
            "rows": [],
            "text": "",
        }

    def write(self, records: list[dict], first_ordinal: int) -> list[RowError]:
        self._keep(records)
        return []

    def _keep(self, records: list[dict]) -> None:
        room = SAMPLE_ROWS - len(self.view["rows"])
        self.view["rows"] += [kept(r) for r in records[: max(room, 0)]]

    def finish(self, final: list[dict]) -> dict[str, Any]:
        self._keep(final)
        rows = [shown(r) for r in self.view["rows"]]
        if self.format == "csv":
            data = connectors.encode_csv(rows, self.columns, header=True)
        else:
            data = connectors.encode_jsonl(rows)
        self.view["text"] = data.decode("utf-8")
        return self.view


def _view_text(view: Mapping[str, Any]) -> ViewText:
    headline = (
        ("would write ", False),
        (view["path"], True),
        (f" ({view['format']}), columns {', '.join(view['columns'])}; it would begin:", False),
    )
    return ViewText(headline, text=view["text"])


def _dataset(places: Places, run_id: str, step: str, config: Config) -> tuple[str, str]:
    exported = connectors.export_file(places.export_dir, run_id, step, config["path"])
    return file_dataset(exported.final_path)


def _remove_stage(
    run_id: str, step: str, config: Config, export_dir: Path, sandbox: Callable
) -> Removed:
    """The chunk folder of its file (a published file's marker goes with it)."""
    export = connectors.export_file(export_dir, run_id, step, config["path"])
    return Removed(stages=export.discard())


def _run_view(
    export_dir: Path, run_id: str, step: Mapping[str, Any], sandbox: Callable | None
) -> dict[str, Any]:
    """The file's path, whether it is written yet, and its format."""
    cfg = step.get("config") or {}
    try:
        exported = connectors.export_file(export_dir, run_id, step["name"], str(cfg.get("path")))
    except connectors.ConnectorError:
        return {"path": None, "exists": False, "where": None, "state": "not yet written"}
    path = exported.final_path
    exists = path.is_file()
    return {
        "path": str(path),
        "exists": exists,
        "format": cfg.get("format", "jsonl"),
        "where": str(path),
        "state": "written" if exists else "not yet written",
    }


FILE = TargetImpl(
    "file",
    FileSink,
    FileExportView,
    {
        "target": {"type": "string", "enum": ["file"]},
        "path": {"type": "string"},
        "format": {"type": "string", "enum": list(EXPORT_FORMATS)},
        "columns": COLUMN_TYPES_SCHEMA,
        "rows": PREVIEW_ROWS_SCHEMA,
        "text": {"type": "string"},
    },
    _view_text,
    _dataset,
    _remove_stage,
    _run_view,
)
TARGETS = (FILE,)
