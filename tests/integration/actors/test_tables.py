"""Sandbox tables through the whole engine: exactly-once upsert export under crashes,
invisibility until the step commits, per-run rows, table ingest resuming after a kill."""

from __future__ import annotations

import json
import signal
import threading

import psycopg2
import pytest

from drills import Stack

N = 10_500
BATCHES = -(-N // 500)  # 21


def _csv(n: int) -> str:
    return "id,name,amount\n" + "".join(
        f'{i},"name {i}\n  second line",{i * 3}\n' for i in range(1, n + 1)
    )


def _export_plan(table: str = "people") -> dict:
    return {
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "people.csv", "columns": {"id": "int"}}},
            {"name": "to_table", "type": "export", "depends_on": ["read"],
             "config": {"target": "table", "table": table, "key": "id"}},
        ]
    }  # fmt: skip


# the `stack` fixture (tests/integration/conftest.py) reads this; env from a parameter
STACK_FILES = {"people.csv": lambda: _csv(N)}


def _rows(stack: Stack, run_id: str) -> tuple[int, int, int]:
    """(rows, distinct keys, sum of amount) of a run in sandbox.people."""
    return stack.sql(
        "SELECT count(*), count(DISTINCT record_key), coalesce(sum(amount), 0)"
        " FROM sandbox.people WHERE run_id = %s",
        run_id,
    )[0]


def _expected_sum(n: int) -> int:
    return sum(i * 3 for i in range(1, n + 1))


def _batches_done(stack: Stack, run_id: str, step: str) -> list[tuple[int, str, int]]:
    return stack.sql(
        "SELECT number, outcome, batches_done FROM attempts"
        " WHERE run_id = %s AND step_name = %s ORDER BY number",
        run_id, step,
    )  # fmt: skip


@pytest.mark.parametrize(
    "stack", [{"ETL_FAULT": "crash_after_export:step=to_table:batch=3"}], indirect=True
)
def test_crash_after_export_before_checkpoint_leaves_no_duplicate(stack: Stack) -> None:
    stack.start()
    run_id = stack.trigger(stack.create("people", _export_plan()))[1]["id"]
    run = stack.wait_run(run_id, timeout=120)
    assert run["status"] == "succeeded", run
    assert _rows(stack, run_id) == (N, N, _expected_sum(N))
    step = next(s for s in run["steps"] if s["name"] == "to_table")
    assert (step["records_in"], step["records_out"], step["rejected"]) == (N, N, 0)
    attempts = _batches_done(stack, run_id, "to_table")
    # attempt 1 exported batch 3 and died before its checkpoint: 2 committed batches
    assert attempts[0][1:] == ("lease_expired", 2)
    assert attempts[1][1] == "succeeded" and attempts[1][2] == BATCHES - 2


@pytest.mark.parametrize(
    "stack", [{"ETL_FAULT": "slow_batches:step=to_table:ms=150"}], indirect=True
)
def test_sigkill_during_table_export_loses_and_doubles_nothing(stack: Stack) -> None:
    stack.start()
    run_id = stack.trigger(stack.create("people", _export_plan()))[1]["id"]
    seen: list[int] = []
    stop = threading.Event()

    def reader() -> None:  # a concurrent reader of the export table
        conn = psycopg2.connect(stack.db_url)
        conn.autocommit = True
        while True:
            done = stop.is_set()  # one last look after the run finished
            with conn.cursor() as cur:
                cur.execute("SELECT to_regclass('sandbox.people')")
                if cur.fetchone()[0]:
                    cur.execute("SELECT count(*) FROM sandbox.people WHERE run_id = %s", (run_id,))
                    seen.append(cur.fetchone()[0])
            if done:
                break
            stop.wait(0.05)
        conn.close()

    watcher = threading.Thread(target=reader)
    watcher.start()
    try:
        live = stack.wait_for(
            lambda: [
                r for r in stack.sql(
                    "SELECT executor, batches_done FROM attempts WHERE run_id = %s"
                    " AND step_name = 'to_table' AND outcome IS NULL AND batches_done >= 4",
                    run_id,
                )
            ],
            what="4 exported batches",
        )  # fmt: skip
        stack.kill(live[0][0].split(":")[0], signal.SIGKILL)
        run = stack.wait_run(run_id, timeout=120)
    finally:
        stop.set()
        watcher.join()
    assert run["status"] == "succeeded", run
    assert _rows(stack, run_id) == (N, N, _expected_sum(N))
    attempts = _batches_done(stack, run_id, "to_table")
    assert [a[1] for a in attempts] == ["lease_expired", "succeeded"]
    assert sum(a[2] for a in attempts) == BATCHES  # no committed batch ran twice
    # the reader saw nothing of the run until the step committed, then everything
    assert set(seen) <= {0, N} and seen[-1] == N, sorted(set(seen))
    assert seen.count(0) > 10


DUPLICATES = 3000  # records; key ids cycle over 1300, so batches 2.. repeat earlier keys
# Three ways a table export's batch reaches staging: in the batch's commit (the sandbox is
# the state database: the default), by the export's own transaction before an overlapped
# commit (a sandbox URL of its own, here the same database), and with nothing overlapped.
COMMIT_PATHS = {
    "staged_in_commit": {},
    "staged_apart": {"ETL_SANDBOX_URL": "{db_url}?application_name=etl-sandbox"},
    "no_overlap": {"ETL_OVERLAP": "0"},
}


@pytest.mark.parametrize("path", list(COMMIT_PATHS))
def test_keys_exported_by_an_earlier_batch_are_rejected_on_every_commit_path(
    stack_factory, path: str
) -> None:
    ids = [i % 1300 for i in range(1, DUPLICATES + 1)]
    ids[1100] = ids[1099]  # a key repeated inside batch 2: that batch is staged apart
    text = "id,name,amount\n" + "".join(f"{k},n{i},{i}\n" for i, k in enumerate(ids, 1))
    stack = stack_factory(files={"people.csv": text})
    stack.topology_env.update(
        {k: v.format(db_url=stack.db_url) for k, v in COMMIT_PATHS[path].items()}
    )
    stack.env.update(stack.topology_env)
    stack.start()
    plan = {**_export_plan(), "on_row_error": "reject"}
    run = stack.wait_run(stack.trigger(stack.create("people", plan))[1]["id"], timeout=120)
    assert run["status"] == "succeeded", run
    # independently: the first record of each key is exported, every later one rejected
    first: dict[int, int] = {}
    for i, k in enumerate(ids, 1):
        first.setdefault(k, i)
    step = next(s for s in run["steps"] if s["name"] == "to_table")
    assert (step["records_in"], step["records_out"]) == (DUPLICATES, len(first))
    assert step["rejected"] == DUPLICATES - len(first)
    got = stack.sql(
        "SELECT id, amount FROM sandbox.people WHERE run_id = %s ORDER BY id", run["id"]
    )
    assert got == sorted(first.items())
    rejects = (stack.rejects / run["id"] / "to_table.jsonl").read_text().splitlines()
    rejected = [json.loads(line)["record"] for line in rejects]
    assert rejected == [i for i, k in enumerate(ids, 1) if first[k] != i]
    # batch 2 was refused in its commit and staged again batch by batch
    redone = "going on from the checkpoint, batch by batch"
    assert (redone in stack.log_text(10**7)) == (path == "staged_in_commit")


def test_two_runs_write_two_sets_of_rows(stack: Stack) -> None:
    stack.start()
    pid = stack.create("people", _export_plan())
    runs = [stack.wait_run(stack.trigger(pid, f"k{i}")[1]["id"]) for i in range(2)]
    assert all(r["status"] == "succeeded" for r in runs)
    for r in runs:
        assert _rows(stack, r["id"]) == (N, N, _expected_sum(N))
    assert stack.sql("SELECT count(DISTINCT run_id) FROM sandbox.people")[0][0] == 2


@pytest.mark.parametrize("stack", [{"ETL_FAULT": "slow_batches:step=read:ms=150"}], indirect=True)
def test_table_ingest_resumes_after_a_kill_without_gaps_or_repeats(stack: Stack) -> None:
    stack.sql(
        "CREATE TABLE sandbox.src (k bigint PRIMARY KEY, label text, day date);"
        "INSERT INTO sandbox.src SELECT g, 'row ' || g, date '2024-01-01' + (g % 300)"
        " FROM generate_series(1, 8000) g"
    )
    stack.start()
    plan = {
        "steps": [
            {"name": "read", "type": "ingest", "config": {"source": "table", "table": "src"}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "file", "path": "src.jsonl"}},
        ]
    }  # fmt: skip
    run_id = stack.trigger(stack.create("src", plan))[1]["id"]
    live = stack.wait_for(
        lambda: stack.sql(
            "SELECT executor FROM attempts WHERE run_id = %s AND step_name = 'read'"
            " AND outcome IS NULL AND batches_done >= 3",
            run_id,
        ),
        what="3 ingested batches",
    )
    stack.kill(live[0][0].split(":")[0], signal.SIGKILL)
    run = stack.wait_run(run_id, timeout=120)
    assert run["status"] == "succeeded", run
    read = run["steps"][0]
    assert read["columns"] == {"k": "int", "label": "string", "day": "date"}
    assert read["records_out"] == 8000
    lines = (stack.exports / run_id / "src.jsonl").read_text().splitlines()
    keys = [json.loads(x)["k"] for x in lines]
    assert keys == list(range(1, 8001))
    assert [a["outcome"] for a in read["attempts"]] == ["lease_expired", "succeeded"]


def test_hostile_table_names_are_refused_as_input_errors(stack: Stack) -> None:
    stack.sql("CREATE TABLE public.elsewhere (id int PRIMARY KEY)")
    stack.start()
    names = ["x; drop table y", '"quoted"', "pg_catalog.pg_class", "elsewhere", "missing"]
    runs = []
    for i, name in enumerate(names):
        plan = {"steps": [{"name": "read", "type": "ingest",
                           "config": {"source": "table", "table": name}}]}  # fmt: skip
        runs.append(stack.trigger(stack.create(f"h{i}", plan))[1]["id"])
    for run_id in runs:
        run = stack.wait_run(run_id)
        assert run["status"] == "failed"
        assert [a["outcome"] for a in run["steps"][0]["attempts"]] == ["input_error"]
    assert stack.sql("SELECT count(*) FROM pg_tables WHERE tablename = 'elsewhere'")[0][0] == 1
