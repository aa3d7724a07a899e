"""The `table` export target (`dag.targets.table`): `sandbox.<table>`, staged per run and step
(in the batch's commit when the sandbox is the state database) and published when the step
commits (`connectors.TableExport`); its preview, lineage dataset, purge and run view."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psycopg2

import connectors
from actors.committer import StagedRows
from actors.datasets import Places, table_dataset
from actors.preview_bounds import kept
from actors.preview_exports import PREVIEW_ROWS_SCHEMA, SAMPLE_ROWS
from actors.stepio import StepEnv
from actors.targets.target import Config, Removed, TargetImpl, ViewText
from dag import RowError, Step, StepStatus
from dag.targets.table import EXPORT_MODES

log = logging.getLogger(__name__)

_TABLE_KEY_COLUMNS = {"run_id": "uuid", "step_id": "text", "record_key": "text"}
_SQL_TYPES = {"int": "bigint", "string": "text", "date": "date"}


class TableSink:
    """An export to `sandbox.NAME`, staged per run/step and published when the step commits."""

    stages_in_commit = True  # a batch's rows may go in the batch's commit (`defer`)

    def __init__(self, step: Step, env: StepEnv, columns: dict[str, str]):
        self.conn = env.sandbox_connect()
        self.export = connectors.TableExport(
            self.conn,
            step.config["table"],
            env.run_id,
            step.name,
            columns,
            step.config.get("key"),
            step.config.get("mode", "append"),
            step.config.get("deleted"),
        )
        self.table = step.config["table"]

    def start(self, *, fresh: bool, chunks: int = 0, records: int = 0) -> None:
        """Begin an attempt: from scratch (leftovers of an attempt that committed nothing
        go), or after `chunks` committed batches of `records` rows (`StagingLost` if the
        staging table no longer holds them). Rows an attempt published before it died are
        left as they are: `publish` finds them there (no batch is left to stage)."""
        if fresh:
            self.export.discard()
        elif self.export.check_staged(chunks, records):
            return
        self.export.prepare()

    def defer(self, chunk: int, records: list[dict], first_ordinal: int) -> StagedRows | None:
        """Batch `chunk`'s rows to be staged in the batch's commit (the sandbox is the
        state database), or None: this batch goes through `write` (see
        `TableExport.deferred_batch`)."""
        deferred = self.export.deferred_batch(chunk, records, first_ordinal)
        return None if deferred is None else StagedRows(*deferred)

    def write(self, chunk: int, records: list[dict], first_ordinal: int) -> list[RowError]:
        return self.export.write_batch(chunk, records, first_ordinal)

    def discard(self) -> None:
        self.export.discard()

    def publish(self, chunks: int, records: int) -> str:
        """Publish the committed batches: exactly `records` rows, or `StagingLost`."""
        self.export.publish(chunks, records)
        return f"sandbox.{self.table}"

    def close(self) -> None:
        self.conn.close()


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


def _view_text(view: Mapping[str, Any]) -> ViewText:
    cols = ", ".join(f"{c} {t}" for c, t in view["columns"].items())
    key = view["key"] or "(record ordinal)"
    how = "merge into" if view.get("mode") == "merge" else "write"
    headline = (
        (f"would {how} table ", False),
        (view["table"], True),
        (f" (key {key}), columns {cols}; {view['note']}", False),
    )
    return ViewText(headline, rows=view["rows"])


def _dataset(places: Places, run_id: str, step: str, config: Config) -> tuple[str, str]:
    return table_dataset(places.sandbox, config["table"])


def _remove_stage(
    run_id: str, step: str, config: Config, export_dir: Path, sandbox: Callable
) -> Removed:
    """Its staging table."""
    return Removed(staging_tables=connectors.drop_staging(sandbox(), run_id, step))


def _withdraw(sandbox: Callable, run_id: str, step: str, config: Config) -> int:
    """The rows it published before its attempt ended without its final commit (a merge
    export's overwritten rows come back)."""
    return connectors.withdraw_run_rows(sandbox(), config["table"], run_id, step)


def _settle(sandbox: Callable, run_id: str, step: str, config: Config) -> None:
    """A succeeded merge keeps its publish; its undo table goes."""
    if config.get("mode") == "merge":
        connectors.settle_merge(sandbox(), run_id, step)


def _run_view(
    export_dir: Path, run_id: str, step: Mapping[str, Any], sandbox: Callable | None
) -> dict[str, Any]:
    """The table, and the rows the step published once it succeeded."""
    cfg = step.get("config") or {}
    rows = _count_rows(sandbox, run_id, step) if step["status"] == StepStatus.SUCCEEDED else None
    table = f"sandbox.{cfg.get('table')}"
    return {"table": table, "rows": rows, "where": table, "state": None}


def _count_rows(sandbox: Callable | None, run_id: str, step: Mapping[str, Any]) -> int | None:
    if sandbox is None:
        return None
    try:
        conn = sandbox()
    except psycopg2.Error:
        log.warning("console: sandbox unavailable for the row count of %s", step["name"])
        return None
    try:
        return connectors.count_run_rows(
            conn, str(step["config"].get("table")), run_id, step["name"]
        )
    except (psycopg2.Error, connectors.ConnectorError):
        log.warning("console: no row count for %s of run %s", step["name"], run_id, exc_info=True)
        return None
    finally:
        conn.close()


_TEXT = {"type": "string"}
TABLE = TargetImpl(
    "table",
    TableSink,
    TableExportView,
    {
        "target": {"type": "string", "enum": ["table"]},
        "table": _TEXT,
        "key": {"anyOf": [_TEXT, {"type": "null"}]},
        "mode": {"type": "string", "enum": list(EXPORT_MODES)},
        "columns": {"type": "object", "additionalProperties": _TEXT},
        "rows": PREVIEW_ROWS_SCHEMA,
        "note": _TEXT,
    },
    _view_text,
    _dataset,
    _remove_stage,
    _run_view,
    withdraw=_withdraw,
    settle=_settle,
)
TARGETS = (TABLE,)
