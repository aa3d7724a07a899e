"""A step's data checks as its attempt runs them (`dag.checks` counts, this keeps and
decides).

Who calls it: `actors.runner`, for every member of a group that has an attempt. `open_checks`
when the member opens (a fresh start drops the keys an earlier attempt committed); `observe`
for each output batch, after the computation and before the batch's commit: the counters go
into the checkpoint (`Progress.checkpoint["checks"]`) and the keys of the `unique` checks
into the batch's own transaction (`StagedRows`, one row of `step_check_key_batches` per
batch and check), so both always match
the committed batches, and an attempt that goes on from a checkpoint counts on from there.
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

__all__ = ["StepChecks", "open_checks"]


class StepChecks:
    """One member's checks during one attempt."""

    def __init__(self, step: Step, run_id: str, state: Any) -> None:
        self.step, self.run_id = step, run_id
        self.checker = Checker(step.checks)
        self.checker.restore(state)
        self._checked_columns = False
        self._staged: list[StagedRows] = []

    def observe(
        self,
        records: Sequence[Mapping[str, Any]],
        columns: Mapping[str, str],
        first: int,
        lines: Sequence[int] | None = None,
    ) -> None:
        """Count one output batch (`first`: the ordinal of its first record in the step's
        output; `lines`: where each record starts in a file ingest's input) and keep its
        unique keys for the batch's commit."""
        if not self._checked_columns:
            self.checker.require(columns)
            self._checked_columns = True
        self.checker.observe(records, first, lines)
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

    def state(self) -> list[list[Any]]:
        """The counters, for the checkpoint."""
        return self.checker.state()

    def verdict(self, conn, records_in: int, records_out: int, rejected: int) -> list[dict]:
        """The results over the whole output (see the module); `CheckFailed` for a failed
        `error` check, after the results are saved."""
        params = {"run_id": self.run_id, "step": self.step.name}
        with conn.cursor() as cur:
            for statement in self.take_staged():  # the step's final records (aggregates)
                cur.execute(statement.query, statement.params)
            for check_no, kind in self.checker.unique_checks():
                query = CHECK_QUERIES["count_duplicate_keys"]
                cur.execute(query, {**params, "check_no": check_no, "examples": MAX_EXAMPLES})
                repeated, examples = cur.fetchone()
                kind.duplicates(repeated, examples)
            results = self.checker.results(records_in, records_out, rejected)
            cur.execute(CHECK_QUERIES["save_check_results"], {**params, "checks": _json(results)})
        conn.commit()
        failed = failed_errors(results)
        if failed:
            raise CheckFailed("; ".join(_said(r) for r in failed))
        return results


def open_checks(conn, step: Step, run_id: str, checkpoint: dict | None) -> StepChecks | None:
    """The member's checks (None without any), going on from `checkpoint`; a start from
    scratch drops the keys an earlier attempt of the step committed."""
    if not step.checks:
        return None
    if checkpoint is None:
        with conn.cursor() as cur:
            cur.execute(CHECK_QUERIES["clear_check_keys"], {"run_id": run_id, "step": step.name})
        conn.commit()
    return StepChecks(step, run_id, (checkpoint or {}).get("checks"))


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
