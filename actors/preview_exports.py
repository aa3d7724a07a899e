"""What a previewed export would write, shown and never written: a file export's path, columns
and first lines; a table export's target and first staged rows, screened as staging
screens them (bad values, null and repeated keys, keys of earlier batches). Its rows keep
no long value (`actors.preview_bounds.kept`), and a file export's text shows each value
over 200 characters cut to its first 16 characters and its length
(`"<16 characters>… [truncated: N chars]"`, short enough for the answer to show it
whole): the text of 5 rows of a 50 MiB value is not written out only to be cut in the
answer."""

from __future__ import annotations

from typing import Any

import connectors
from actors.preview_bounds import Cut, clip, kept
from actors.steps import StepEnv
from dag import RowError, Step

PREVIEW_RUN_ID = "00000000-0000-0000-0000-000000000000"  # stands for the run's id in paths
SAMPLE_ROWS = 5
TEXT_VALUE_CHARS = 16  # of a long value in a file export's text
_TABLE_KEY_COLUMNS = {"run_id": "uuid", "step_id": "text", "record_key": "text"}
_SQL_TYPES = {"int": "bigint", "string": "text", "date": "date"}


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
        rows = [_shown(r) for r in self.view["rows"]]
        if self.format == "csv":
            data = connectors.encode_csv(rows, self.columns, header=True)
        else:
            data = connectors.encode_jsonl(rows)
        self.view["text"] = data.decode("utf-8")
        return self.view


class TableExportView:
    """What a table export would stage: the export's own per-batch screening (bad values,
    null and repeated keys), keys of earlier batches refused as staging refuses them."""

    def __init__(self, step: Step, env: StepEnv, columns: dict[str, str]):
        self.key = step.config.get("key")
        self.columns = connectors.check_export_columns(columns, self.key)
        self.seen: set[str] = set()
        table = connectors.check_table_name(step.config["table"])
        self.view: dict[str, Any] = {
            "target": "table",
            "table": f"sandbox.{table}",
            "key": self.key,
            "mode": step.config.get("mode", "append"),
            "columns": {
                **{c: _SQL_TYPES[t] for c, t in self.columns.items()},
                **_TABLE_KEY_COLUMNS,
            },
            "rows": [],
            "note": "an existing table is not checked: the preview does not touch it",
        }

    def write(self, records: list[dict], first_ordinal: int) -> list[RowError]:
        staged, errors = connectors.screen_export_batch(
            self.columns, self.key, records, first_ordinal
        )
        for record_key, (ordinal, record, _) in staged.items():
            if record_key in self.seen:
                errors.append(
                    connectors.duplicate_key_error(self.key, record_key, ordinal, record, None)
                )
                continue
            self.seen.add(record_key)
            if len(self.view["rows"]) < SAMPLE_ROWS:
                row = {c: record.get(c) for c in self.columns}
                self.view["rows"].append(kept({**row, "record_key": record_key}))
        errors.sort(key=lambda e: e.record or 0)
        return errors

    def finish(self, final: list[dict]) -> dict[str, Any]:
        return self.view


def _shown(row: dict[str, Any]) -> dict[str, Any]:
    """A kept row as a file export's text shows it: each `Cut` value cut to
    `TEXT_VALUE_CHARS`, with its length."""
    return {k: clip(v, TEXT_VALUE_CHARS) if isinstance(v, Cut) else v for k, v in row.items()}


def build_export_view(step: Step, env: StepEnv, columns: dict[str, str]):
    """What a previewed export step would write, shown instead of written."""
    if step.config.get("target") == "table":
        return TableExportView(step, env, columns)
    return FileExportView(step, env, columns)
