"""The numbers of the crash, recovery, takeover and failover tests: ids 1..N in `nums.csv`,
the plan reading them into a JSONL export (`PLAN`; `TABLE_PLAN` also into `sandbox.nums`),
and what the table holds of a run (count, distinct keys, min, max: `(N, N, 1, N)` when
exact)."""

from __future__ import annotations

from drills import Stack

N = 6000  # 12 batches per step
READ = {"name": "read", "type": "ingest",
        "config": {"source": "file", "path": "nums.csv", "columns": {"id": "int"}}}  # fmt: skip
OUT = {"name": "out", "type": "export", "depends_on": ["read"],
       "config": {"target": "file", "path": "nums.jsonl"}}  # fmt: skip
TO_TABLE = {"name": "to_table", "type": "export", "depends_on": ["read"],
            "config": {"target": "table", "table": "nums", "key": "id"}}  # fmt: skip
PLAN = {"steps": [READ, OUT]}
TABLE_PLAN = {"steps": [READ, TO_TABLE, OUT]}


def write_nums(stack: Stack) -> None:
    (stack.data / "nums.csv").write_text("id\n" + "".join(f"{i}\n" for i in range(1, N + 1)))


def table_rows(stack: Stack, run_id: str) -> tuple:
    """Count, distinct record keys, min and max id of the run's rows in `sandbox.nums`."""
    return stack.sql(
        "SELECT count(*), count(DISTINCT record_key), min(id), max(id) FROM sandbox.nums"
        " WHERE run_id = %s",
        run_id,
    )[0]
