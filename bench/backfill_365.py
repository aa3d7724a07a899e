"""`python -m bench.backfill_365 [--values 365] [--repeat 5]`: what a backfill costs the
coordinator. On a fresh database with one pipeline reading `daily/{day}.csv`, each repeat
creates a backfill of `--values` days in one transaction with the first admission pass (what
`POST /pipelines/{id}/backfills` does: the time to its first admitted run), then lets the
values through two at a time: the runs admitted are ended by an UPDATE (the engine's part,
not measured) and the backfiller's admission pass (`Backfiller.admit_once`, the
coordinator's own: `admit_waiting` in one transaction on its session, wake-ups to a no-op)
is measured. Prints the median and range over the repeats of the time to the first
admitted run and of the coordinator's cost per value (creation and every pass, divided by
the values): wall time, the process's CPU time and the statements sent (round trips, what
a pass is made of: wall time on a loaded host is mostly waiting), beside the same figures
of one plain trigger (`admit_run` in its own transaction, the work of `POST .../runs`).
Not a test: nothing asserts."""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg2
import psycopg2.extensions
from psycopg2.extras import RealDictCursor

from bench.admission_db import END_ACTIVE, fresh_pipeline
from service.backfiller import Backfiller
from service.domain.backfills import admit_waiting, create_backfill
from service.domain.runs import admit_run

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


class Counting(psycopg2.extensions.connection):
    """A connection counting the statements its cursors send (round trips to the server)."""

    statements = 0

    def cursor(self, *args, cursor_factory=None, **kwargs):
        conn, base = self, cursor_factory or psycopg2.extensions.cursor

        class Counted(base):
            def execute(self, query, params=None):
                conn.statements += 1
                return super().execute(query, params)

        return super().cursor(*args, cursor_factory=Counted, **kwargs)


@dataclass
class Cost:
    """What some admissions cost the coordinator: wall and CPU seconds, statements sent."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    statements: int = 0

    def per(self, n: int) -> tuple[float, float, float]:
        """(wall ms, CPU ms, statements) per one of `n`."""
        return self.wall_s * 1000 / n, self.cpu_s * 1000 / n, self.statements / n


@contextmanager
def measured(cost: Cost, conn: Counting) -> Iterator[None]:
    wall, cpu, sent = time.perf_counter(), time.process_time(), conn.statements
    yield
    cost.wall_s += time.perf_counter() - wall
    cost.cpu_s += time.process_time() - cpu
    cost.statements += conn.statements - sent


def connect(url: str) -> Counting:
    return psycopg2.connect(url, connection_factory=Counting)


def one_backfill(
    conn: Counting, filler: Backfiller, session: list[Counting], pid: str, values: int
) -> tuple[float, Cost]:
    """(seconds to the first admitted run, the coordinator's cost of all the values)."""
    first_day = "2013-01-01"
    last_day = time.strftime("%Y-%m-%d", time.gmtime(1356998400 + (values - 1) * 86400))
    body = {"param": "day", "from": first_day, "to": last_day}
    cost = Cost()
    with measured(cost, conn), conn, conn.cursor(cursor_factory=RealDictCursor) as cur:
        create_backfill(cur, pid, body, "bench")
        admitted = len(admit_waiting(cur))
    first_s = cost.wall_s
    while admitted < values:
        with conn, conn.cursor() as cur:
            cur.execute(END_ACTIVE)
        with measured(cost, session[-1]):
            admitted += filler.admit_once()
    with conn, conn.cursor() as cur:
        cur.execute(END_ACTIVE)
    return first_s, cost


def one_trigger(conn: Counting, pid: str, cost: Cost) -> None:
    """One plain trigger (`admit_run` in its own transaction), the baseline, into `cost`."""
    with conn, conn.cursor() as cur:
        cur.execute(END_ACTIVE)
    with measured(cost, conn), conn, conn.cursor(cursor_factory=RealDictCursor) as cur:
        admit_run(cur, pid, f"bench:{uuid.uuid4()}", "bench", params={"day": "2013-01-01"})


def _line(name: str, xs: list[float], unit: str, what: str) -> str:
    return (f"{name}: median {statistics.median(xs):.2f}{unit} (range {min(xs):.2f}-"
            f"{max(xs):.2f}{unit}, {what})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=int, default=365)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    url, pid = fresh_pipeline(DB, "daily", PLAN)
    conn = connect(url)
    session: list[Counting] = []  # the backfiller's connection, to count what it sends

    def open_session() -> Counting:
        session.append(connect(url))
        return session[-1]

    filler = Backfiller(open_session, lambda run_id, trace_id: None)
    filler.admit_once()  # its session opened (nothing waits yet): not measured
    firsts, walls, cpus, sent = [], [], [], []
    for _ in range(args.repeat):
        first_s, cost = one_backfill(conn, filler, session, pid, args.values)
        wall, cpu, statements = cost.per(args.values)
        firsts.append(first_s * 1000)
        walls.append(wall)
        cpus.append(cpu)
        sent.append(statements)
    triggers = []
    for _ in range(50):
        one_trigger(conn, pid, cost := Cost())
        triggers.append(cost)
    filler.shutdown()
    conn.close()
    what = f"{args.repeat} backfills of {args.values} values"
    base = [t.per(1) for t in triggers]
    for i, name in enumerate(("wall", "CPU", "statements")):
        unit = "" if i == 2 else " ms"
        print(_line(f"baseline, one trigger (admit_run, own transaction), {name}",
                    [b[i] for b in base], unit, "50 triggers"))  # fmt: skip
    print(_line("first run admitted (create + first pass), wall", firsts, " ms", what))
    for name, xs, unit in (("wall", walls, " ms"), ("CPU", cpus, " ms"),
                           ("statements", sent, "")):  # fmt: skip
        print(_line(f"coordinator per value, {name}", xs, unit, what))


if __name__ == "__main__":
    main()
