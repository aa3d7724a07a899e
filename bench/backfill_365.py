"""`python -m bench.backfill_365 [--values 365] [--repeat 5]`: what a backfill costs the
coordinator. On a fresh database with one pipeline reading `daily/{day}.csv`, each repeat
creates a backfill of `--values` days in one transaction with the first admission pass (what
`POST /pipelines/{id}/backfills` does: the time to its first admitted run), then lets the
values through two at a time: the runs admitted are ended by an UPDATE (the engine's part,
not timed) and the backfiller's admission pass (`admit_waiting`, in its own transaction, as
`service/backfiller.py` runs it) is timed. Prints the median and range over the repeats of
the time to the first admitted run and of the coordinator time per value (all passes' time
divided by the values), beside the baseline of one plain trigger (`admit_run` in its own
transaction, the work of `POST .../runs`). Not a test: nothing asserts."""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid

import psycopg2
import psycopg2.extras

import ddl
from service.domain.backfills import admit_waiting, create_backfill
from service.domain.runs import admit_run

PG = "postgresql://postgres@127.0.0.1:5432"
DB = "etl_bench_backfill"
PLAN = {
    "params": {"day": {"type": "date"}},
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "daily/{day}.csv"}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "out/{day}.jsonl"}},
    ],
}  # fmt: skip
END_ACTIVE = "UPDATE runs SET status = 'succeeded', started_at = now(), finished_at = now()" \
    " WHERE status IN ('queued', 'running')"  # fmt: skip


def _fresh(url: str) -> str:
    admin = psycopg2.connect(f"{PG}/postgres")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin.close()
    ddl.migrate(url)
    pid = str(uuid.uuid4())
    conn = psycopg2.connect(url)
    with conn, conn.cursor() as cur:
        cur.execute("INSERT INTO pipelines (id, name, revision) VALUES (%s, 'daily', 1)", (pid,))
        cur.execute(
            "INSERT INTO revisions (pipeline_id, number, plan, created_by)"
            " VALUES (%s, 1, %s, 'bench')",
            (pid, json.dumps(PLAN)),
        )
    conn.close()
    return pid


def one_backfill(conn, pid: str, values: int) -> tuple[float, float]:
    """(seconds to the first admitted run, coordinator seconds per value)."""
    first_day = "2013-01-01"
    last_day = time.strftime("%Y-%m-%d", time.gmtime(1356998400 + (values - 1) * 86400))
    body = {"param": "day", "from": first_day, "to": last_day}
    started = time.perf_counter()
    with conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        create_backfill(cur, pid, body, "bench")
        admitted = len(admit_waiting(cur))
    first_s = time.perf_counter() - started
    spent = first_s
    while admitted < values:
        with conn, conn.cursor() as cur:
            cur.execute(END_ACTIVE)
        t0 = time.perf_counter()
        with conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            admitted += len(admit_waiting(cur))
        spent += time.perf_counter() - t0
    with conn, conn.cursor() as cur:
        cur.execute(END_ACTIVE)
    return first_s, spent / values


def one_trigger(conn, pid: str) -> float:
    """Seconds of one plain trigger (`admit_run` in its own transaction): the baseline."""
    with conn, conn.cursor() as cur:
        cur.execute(END_ACTIVE)
    started = time.perf_counter()
    with conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        admit_run(cur, pid, f"bench:{uuid.uuid4()}", "bench", params={"day": "2013-01-01"})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=int, default=365)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    url = f"{PG}/{DB}"
    pid = _fresh(url)
    conn = psycopg2.connect(url)
    firsts, per_value = [], []
    for _ in range(args.repeat):
        first_s, value_s = one_backfill(conn, pid, args.values)
        firsts.append(first_s * 1000)
        per_value.append(value_s * 1000)
    triggers = [one_trigger(conn, pid) * 1000 for _ in range(50)]
    conn.close()
    print(f"baseline, one trigger (admit_run, own transaction): median"
          f" {statistics.median(triggers):.2f} ms (range {min(triggers):.2f}-{max(triggers):.2f}"
          " ms, 50 triggers)")  # fmt: skip
    for name, xs in (("first run admitted", firsts), ("coordinator time per value", per_value)):
        print(f"{name}: median {statistics.median(xs):.2f} ms"
              f" (range {min(xs):.2f}-{max(xs):.2f} ms, {args.repeat} backfills of"
              f" {args.values} values)")  # fmt: skip


if __name__ == "__main__":
    main()
