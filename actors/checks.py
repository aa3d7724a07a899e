"""A step's data checks as its attempt runs them (`dag.checks` counts, this keeps and
decides).

Who calls it: `actors.attempt`, for every member of a group that has an attempt. `open_checks`
when the member opens (a fresh start drops the keys an earlier attempt committed); `observe`
for each output batch, after the computation and before the batch's commit: the counters go
into the checkpoint (`Progress.checkpoint["checks"]`, with `"check_files"`: where each file
of a glob ingest starts in the output, for the `first_file` of a `unique` example) and the
keys of the `unique` checks into the batch's own transaction (`StagedRows`, one row of
`step_check_key_batches` per batch and check), so both always match the committed
batches, and an attempt that goes on from a checkpoint counts on from there.
`verdict` at the end, after the last batch committed and before anything of the step is
published: it counts the repeated keys in PostgreSQL (the memory bound: one batch of keys),
saves the results with the step in a transaction of its own, and raises `CheckFailed` when
an `error` check failed, which fails the step as an input-data error (not retried) with
nothing of it published."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from actors.committer import StagedRows
from actors.sql import CHECK_QUERIES
from dag import MAX_EXAMPLES, Checker, CheckFailed, Step, failed_errors, key_digests
from ddl import Cursor

__all__ = ["StepChecks", "open_checks"]


class StepChecks:
    """One member's checks during one attempt."""

    def __init__(self, step: Step, run_id: str, checkpoint: Mapping[str, Any]) -> None:
        self.step, self.run_id = step, run_id
        self.checker = Checker(step.checks)
        self.checker.restore(checkpoint.get("checks"))
        # [first ordinal, file] of each file of a glob ingest, in output order
        self.files: list[list[Any]] = list(checkpoint.get("check_files") or ())
        self._checked_columns = False
        self._staged: list[StagedRows] = []

    def observe(
        self,
        records: Sequence[Mapping[str, Any]],
        columns: Mapping[str, str],
        first: int,
        lines: Sequence[int] | None = None,
        file: str | None = None,
    ) -> None:
        """Count one output batch (`first`: the ordinal of its first record in the step's
        output; `lines`: where each record starts in a file ingest's input; `file`: that
        file, a glob ingest's) and keep its unique keys for the batch's commit."""
        if not self._checked_columns:
            self.checker.require(columns)
            self._checked_columns = True
        self.checker.observe(records, first, lines, file)
        if file is not None and records and (not self.files or self.files[-1][1] != file):
            self.files.append([first, file])
        if not records:
            return
        for check_no, kind in self.checker.unique_checks():
            hashes, keys = key_digests(records, kind.columns())
            params = {
                "run_id": self.run_id,
                "step": self.step.name,
                "check_no": check_no,
                "first": first,
                "hashes": _array(hashes),
                "keys": f"[{','.join(keys)}]",
                "lines": None if lines is None else _array(lines),
            }
            self._staged.append(StagedRows(CHECK_QUERIES["stage_check_keys"], params))

    def take_staged(self) -> list[StagedRows]:
        """The statements of the batch just observed (for its commit), once."""
        staged, self._staged = self._staged, []
        return staged

    def save(self, checkpoint: dict[str, Any]) -> None:
        """The counters (and the files' starts) into the batch's checkpoint."""
        checkpoint["checks"] = self.checker.state()
        if self.files:
            checkpoint["check_files"] = self.files

    def verdict(self, conn, records_in: int, records_out: int, rejected: int) -> list[dict]:
        """The results over the whole output (see the module); `CheckFailed` for a failed
        `error` check, after the results are saved."""
        params = {"run_id": self.run_id, "step": self.step.name}
        with conn.cursor(cursor_factory=Cursor) as cur:
            for statement in self.take_staged():  # the step's final records (aggregates)
                cur.execute(statement.query, statement.params)
            for check_no, kind in self.checker.unique_checks():
                query = CHECK_QUERIES["count_duplicate_keys"]
                cur.execute(query, {**params, "check_no": check_no, "examples": MAX_EXAMPLES})
                found = cur.fetchone()
                kind.duplicates(found["repeated"], [self._placed(e) for e in found["examples"]])
            results = self.checker.results(records_in, records_out, rejected)
            cur.execute(CHECK_QUERIES["save_check_results"], {**params, "checks": _json(results)})
        conn.commit()
        failed = failed_errors(results)
        if failed:
            raise CheckFailed("; ".join(_said(r) for r in failed))
        return results

    def _placed(self, example: dict[str, Any]) -> dict[str, Any]:
        """A `unique` example with its first record's file (a glob ingest's) before its
        line, and its key as a JSON array when migration 0029 moved it as text."""
        key = _moved_key(example["key"])
        first = example["first_record"]
        files = [f for start, f in self.files if start <= first]
        placed = {"key": key, "records": example["records"], "first_record": first}
        if files:
            placed["first_file"] = files[-1]
        if "first_line" in example:
            placed["first_line"] = example["first_line"]
        return placed


def _moved_key(key: Any) -> Any:
    """A key as `dag.key_digests` shows it. Migration 0029 moved the keys of steps in
    flight as JSON strings of their text (at most 200 characters, cut where longer): the
    text of a whole key is its array; a cut one, a string ending with "…" as a long key
    shows. A key shown cut by `dag.key_digests` already ends with it."""
    if not isinstance(key, str) or key.endswith("…"):
        return key
    try:
        return json.loads(key)
    except ValueError:
        return key + "…"


def open_checks(conn, step: Step, run_id: str, checkpoint: dict | None) -> StepChecks | None:
    """The member's checks (None without any), going on from `checkpoint`; a start from
    scratch drops the keys an earlier attempt of the step committed."""
    if not step.checks:
        return None
    if checkpoint is None:
        with conn.cursor() as cur:
            cur.execute(CHECK_QUERIES["clear_check_keys"], {"run_id": run_id, "step": step.name})
        conn.commit()
    return StepChecks(step, run_id, checkpoint or {})


def _said(result: Mapping[str, Any]) -> str:
    """A failed check as the step's error: which check, how many, the first examples."""
    spec = {k: v for k, v in result.items() if k not in _RESULT_KEYS}
    shown = json.dumps(result["examples"][:3], ensure_ascii=False, default=str)
    return f"check {json.dumps(spec, ensure_ascii=False)} failed: {result['message']}; e.g. {shown}"


_RESULT_KEYS = ("severity", "outcome", "failing", "examples", "message")


def _array(numbers: Sequence[int]) -> str:
    """An int array literal of PostgreSQL: one string, not a parameter per value."""
    return "{" + ",".join(map(str, numbers)) + "}"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
