"""The `table` ingest source (`dag.sources.table`): a sandbox table, read-only in primary-key
order; with a cursor, the window of the run's step (`actors.cursors`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import connectors
from actors.cursors import step_window
from actors.datasets import Places, table_dataset
from actors.sources.source import Config, SourceImpl
from actors.stepio import InputBatch, StepEnv
from dag import BATCH_SIZE, Step


class TableSource:
    """Ingest from a sandbox table in primary-key order (keyset pagination); with `limit` (a
    preview) only its first `limit` rows. With a `cursor` column a run reads the window of
    its step (`actors.cursors`); a preview reads the table's first rows whatever the mark."""

    def __init__(
        self, step: Step, env: StepEnv, columns: dict[str, str] | None, limit: int | None = None
    ):
        self.config = step.config
        self.name = step.name
        self.env = env
        self.columns = columns
        self.limit = limit

    def batches(self, checkpoint: dict | None, records_before: int) -> Iterator[InputBatch]:
        conn = self.env.sandbox_connect()
        try:
            source = connectors.resolve_source_table(conn, self.config["table"])
            self.columns = self.columns or dict(source.columns)
            window = None
            if "cursor" in self.config and self.limit is None:
                window = step_window(
                    self.env.state_conn, conn, self.env.run_id, self.name, source,
                    self.config["cursor"],
                )  # fmt: skip
            after = (checkpoint or {}).get("after_key")
            left = self.limit
            for records, last_key in connectors.read_table_batches(
                conn, source, after_key=after, batch_size=BATCH_SIZE, window=window
            ):
                position = {"after_key": last_key}
                if left is not None and len(records) >= left:
                    yield InputBatch(records[:left], [], left, {}, digest_records=True)
                    return
                if left is not None:
                    left -= len(records)
                yield InputBatch(records, [], len(records), position, digest_records=True)
        finally:
            conn.close()


def _view(config: Config) -> dict[str, Any]:
    return {
        "source": "table",
        "table": f"sandbox.{config['table']}",
        "read_only": True,
        "note": "reads the sandbox table read-only, in primary-key order",
    }


def _where(view: Mapping[str, Any]) -> str:
    return f" · {view['table']}, read-only"


def _dataset(places: Places, config: Config) -> tuple[str, str]:
    return table_dataset(places.sandbox, config["table"])


_TEXT = {"type": "string"}
TABLE = SourceImpl(
    "table",
    TableSource,
    _view,
    {
        "source": {"type": "string", "enum": ["table"]},
        "table": _TEXT,
        "read_only": {"const": True},
        "note": _TEXT,
    },
    _where,
    _dataset,
)
SOURCES = (TABLE,)
