"""The modes of a table export (`config.mode`): how `sandbox.NAME` is keyed, how a step's
staged rows are published into it, and how an attempt finds its publish already done.

- `append` (the default): one copy per run, primary key `(run_id, step_id, record_key)`;
  the publish inserts the step's rows; a publish is done when the table holds exactly the
  step's committed rows of this run and step.
- `merge`: one row per `record_key` (the primary key alone), carrying the `run_id` and
  `step_id` of its last writer; the publish keeps the rows it overwrites in the step's
  undo table (`connectors.merge_undo`), deletes the keys whose staged row marks them
  deleted (the export's `deleted` column not null) and upserts the other staged rows,
  under the table's advisory lock, in one transaction; a publish is done when the undo
  table exists."""

from __future__ import annotations

from typing import Any

from connectors.merge_undo import undo_exists
from connectors.published_rows import count_run_rows


class AppendMode:
    """One copy of the step's rows per run."""

    name = "append"
    key_columns = ("run_id", "step_id", "record_key")
    create_query = "create_export_table"
    # The statements of a publish, in one transaction; the rows of the last are counted.
    # A plain INSERT first: a run's rows are new (a publish that committed dropped the
    # staging table with it); should one be there all the same, the unique violation undoes
    # it and the upsert runs.
    publishes = (("insert_staging",), ("publish_staging",))
    # The ways that build an empty table's primary key after its rows (the plain INSERT).
    rebuilds = frozenset({0})

    def unpublished(self, conn: Any, table: str, run_id: str, step_name: str, rows: int):
        """Why the step's publish is not done (the staging table is gone), or None when it
        is: the table holds exactly the step's `rows` rows of this run (own transaction)."""
        there = count_run_rows(conn, table, run_id, step_name) or 0
        return None if there == rows else f"sandbox.{table} holds {there} of its {rows} row(s)"


class MergeMode:
    """One row per record key; the last publish wins, and says who wrote it."""

    name = "merge"
    key_columns = ("record_key",)
    create_query = "create_merge_table"
    publishes = (
        (
            "lock_export_table",
            "create_merge_undo",
            "save_merge_undo",
            "delete_merged",
            "merge_staging",
        ),
    )
    rebuilds: frozenset[int] = frozenset()

    def unpublished(self, conn: Any, table: str, run_id: str, step_name: str, rows: int):
        """Why the step's publish is not done, or None when it is: the step's undo table
        exists (own transaction)."""
        with conn, conn.cursor() as cur:
            if undo_exists(cur, run_id, step_name):
                return None
        return f"no merge of its {rows} row(s) into sandbox.{table} is recorded"


EXPORT_MODES: dict[str, AppendMode | MergeMode] = {"append": AppendMode(), "merge": MergeMode()}
