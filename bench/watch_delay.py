"""`python -m bench.watch_delay [--files 10] [--poll 1] [--settle 2]`: the delay from a file
complete under `ETL_DATA_DIR` to its run admitted. On a fresh database with one pipeline
whose schedule watches `incoming/*.csv`, the coordinator's watcher (`service.watcher.Watcher`,
its own thread, the production poll of 1 s and settle interval of 2 s unless given) runs
while this program writes one file at a time at a random moment of the poll cycle, closes it
(the moment it is complete), and waits for the run whose `params.file` names it; the delay is
the run's `created_at` (its admission's transaction, the database's clock on this host) minus
the moment of the close. Each run is then ended by an UPDATE (the engine's part, not timed)
so the next file finds room. Prints the median and range of the delays beside the baseline
of one plain trigger (`admit_run` in its own transaction, the work of `POST .../runs`) and
the settle interval, the part of the delay that is chosen. Not a test: nothing asserts."""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import psycopg2
import psycopg2.extras

from bench.admission_db import END_ACTIVE, fresh_pipeline
from service.domain.runs import admit_run
from service.watcher import Watcher

DB = "etl_bench_watch"
PLAN = {
    "params": {"file": {"type": "string"}},
    "steps": [
        {"name": "read", "type": "ingest", "config": {"source": "file", "path": "{file}"}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "out.jsonl"}},
    ],
}  # fmt: skip


def _fresh() -> tuple[str, str]:
    """A fresh database with the pipeline and its watch schedule; its URL, the pipeline's id."""
    url, pid = fresh_pipeline(DB, "watched", PLAN)
    conn = psycopg2.connect(url)
    with conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO schedules (id, pipeline_id, watch, created_by)"
            " VALUES (%s, %s, 'incoming/*.csv', 'bench')",
            (str(uuid.uuid4()), pid),
        )
    conn.close()
    return url, pid


def one_file(conn, incoming: Path, n: int, poll_s: float) -> float:
    """Seconds from file `n` closed to its run admitted."""
    with conn, conn.cursor() as cur:
        cur.execute(END_ACTIVE)
    time.sleep(random.uniform(0, poll_s))  # any moment of the poll cycle
    path = incoming / f"f{n:04d}.csv"
    with path.open("w") as f:
        f.write("n\n" + "".join(f"{k}\n" for k in range(1000)))
    complete = time.time()
    while True:
        with conn, conn.cursor() as cur:
            cur.execute(
                "SELECT extract(epoch FROM created_at) FROM runs WHERE params->>'file' = %s",
                (f"incoming/{path.name}",),
            )
            row = cur.fetchone()
        if row is not None:
            return float(row[0]) - complete
        time.sleep(0.02)


def one_trigger(conn, pid: str) -> float:
    """Seconds of one plain trigger (`admit_run` in its own transaction): the baseline."""
    with conn, conn.cursor() as cur:
        cur.execute(END_ACTIVE)
    started = time.perf_counter()
    with conn, conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        admit_run(cur, pid, f"bench:{uuid.uuid4()}", "bench", params={"file": "x.csv"})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--poll", type=float, default=1.0, help="ETL_WATCH_POLL_S")
    parser.add_argument("--settle", type=float, default=2.0, help="ETL_WATCH_SETTLE_S")
    args = parser.parse_args()
    url, pid = _fresh()
    conn = psycopg2.connect(url)
    with tempfile.TemporaryDirectory() as data:
        incoming = Path(data) / "incoming"
        incoming.mkdir()
        watcher = Watcher(
            lambda: psycopg2.connect(url), lambda r, t: None, Path(data),
            poll_s=args.poll, settle_s=args.settle,
        )  # fmt: skip
        watcher.start()
        try:
            delays = [one_file(conn, incoming, n, args.poll) for n in range(args.files)]
        finally:
            watcher.shutdown()
    triggers = [one_trigger(conn, pid) * 1000 for _ in range(20)]
    conn.close()
    print(f"baseline, one trigger (admit_run, own transaction): median"
          f" {statistics.median(triggers):.2f} ms (range {min(triggers):.2f}-{max(triggers):.2f}"
          " ms, 20 triggers)")  # fmt: skip
    print(f"settle interval (chosen): {args.settle:g} s; poll every {args.poll:g} s")
    print(f"file complete -> run admitted: median {statistics.median(delays):.2f} s"
          f" (range {min(delays):.2f}-{max(delays):.2f} s, {args.files} files)")  # fmt: skip


if __name__ == "__main__":
    main()
