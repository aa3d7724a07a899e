"""File-arrival schedules on a real topology (coordinator with its watcher, two executors):
100 files dropped at once make exactly 100 runs, one per file, in name order, none skipped,
each reading its own file; a file written slowly (growing while the watcher polls) makes one
run, only once complete; a coordinator restart re-triggers nothing; a changed content makes
a new run, an unchanged file touched again makes none. The settle interval is short here
(0.8 s, polls every 0.2 s), the writer's pauses shorter still."""

from __future__ import annotations

import os
import time

from drills import Stack

STACK_ENV = {"ETL_WATCH_POLL_S": "0.2", "ETL_WATCH_SETTLE_S": "0.8"}
PLAN = {
    "params": {"file": {"type": "string"}},
    "steps": [
        {"name": "read", "type": "ingest", "config": {"source": "file", "path": "{file}"}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "out.jsonl"}},
    ],
}  # fmt: skip


def watched(stack: Stack, glob: str) -> str:
    stack.start()
    pid = stack.create(f"watch-{glob.split('/')[0]}", PLAN)
    status, body = stack.req("POST", f"/pipelines/{pid}/schedules", {"watch": glob})
    assert status == 201, body
    return pid


def runs(stack: Stack, pid: str) -> list[tuple]:
    """(file, status, records read, created_at) of the pipeline's runs in queue order."""
    return stack.sql(
        "SELECT r.params->>'file', r.status, s.records_in, r.created_at FROM runs r"
        " LEFT JOIN step_runs s ON s.run_id = r.id AND s.name = 'read'"
        " WHERE r.pipeline_id = %s ORDER BY r.queue_seq",
        pid,
    )


def finished(stack: Stack, pid: str, n: int) -> list[tuple]:
    def done() -> list[tuple] | None:
        now = runs(stack, pid)
        return now if len(now) >= n and all(r[1] in ("succeeded", "failed") for r in now) else None

    return stack.wait_for(done, timeout=600, what=f"{n} finished runs", every=0.5)


def test_a_hundred_files_dropped_at_once_make_a_hundred_runs_in_name_order(stack: Stack):
    pid = watched(stack, "incoming/*.csv")
    staging, incoming = stack.data / "staging", stack.data / "incoming"
    staging.mkdir()
    incoming.mkdir()
    names = [f"f{i:03d}.csv" for i in range(100)]
    for i, name in enumerate(names):  # i % 7 + 1 records each
        (staging / name).write_text("n,v\n" + "".join(f"{i},{k}\n" for k in range(i % 7 + 1)))
    for name in names:  # all within milliseconds, as `mv staging/* incoming/` does
        os.rename(staging / name, incoming / name)
    done = finished(stack, pid, 100)
    assert [(f, s, n) for f, s, n, _ in done] == [
        (f"incoming/{name}", "succeeded", i % 7 + 1) for i, name in enumerate(names)
    ]
    assert stack.sql("SELECT count(*) FROM runs WHERE status = 'skipped'") == [(0,)]


def test_a_slow_file_runs_once_complete_and_restarts_touches_and_changes(stack: Stack):
    pid = watched(stack, "drop/*.csv")
    drop = stack.data / "drop"
    drop.mkdir()
    slow = drop / "a_slow.csv"
    with slow.open("w") as f:  # 40 records over about 10 s; the watcher polls meanwhile
        f.write("n\n")
        for k in range(40):
            f.write(f"{k}\n")
            f.flush()
            time.sleep(0.25)
    complete = time.time()
    ((file, status, records, created),) = finished(stack, pid, 1)
    assert (file, status, records) == ("drop/a_slow.csv", "succeeded", 40)
    assert created.timestamp() > complete  # admitted only after the last write
    stack.kill("coordinator")
    stack.spawn("coordinator", "coordinator")
    stack.wait_healthy()
    os.utime(slow)  # touched, the same content
    (drop / "b_marker.csv").write_text("n\n1\n")
    finished(stack, pid, 2)
    (drop / "b_marker.csv").write_text("n\n1\n2\n")  # a changed content: a new file
    done = finished(stack, pid, 3)
    assert [(f, s, n) for f, s, n, _ in done] == [
        ("drop/a_slow.csv", "succeeded", 40),
        ("drop/b_marker.csv", "succeeded", 1),
        ("drop/b_marker.csv", "succeeded", 2),
    ]
    assert stack.sql("SELECT count(*) FROM watched_files") == [(3,)]
