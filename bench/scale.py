"""`python -m bench.scale`: issue 13's scale figures. Not a test: nothing here asserts.

- (c) the largest seeded CSV under the 50 MiB ingest limit (about 440,000 records) through
  shape (b) (ingest -> normalize -> table export + JSONL export), next to its baseline, with
  the 100,000-record figures of the same run for the per-record comparison;
- (d) a sandbox-table ingest -> normalize -> table export of 100,000 and of 1,000,000 rows
  (each on a fresh topology, so each executor's VmHWM is that run's peak), then the
  1,000,000-row run again with the executor holding the table export's attempt SIGKILLed
  half-way through the export: exactly 1,000,000 rows with distinct keys must come out, and
  at most one committed batch of the killed attempt is redone.

Both parts start their own `etl up` topologies with production timings (lease 30 s), so the
kill costs a lease expiry. `--part c` or `--part d` runs one part."""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from bench.import_100k import _load, baseline, run_pipeline
from dag import BATCH_SIZE, MAX_SOURCE_BYTES, RunStatus
from ddl import connect
from drills.report import seconds
from drills.topology import Topology
from drills.workload import generate_csv, import_plan

SOURCE_TABLE = "bench_source"
SOURCE_DDL = f"""
DROP TABLE IF EXISTS sandbox.{SOURCE_TABLE};
CREATE TABLE sandbox.{SOURCE_TABLE} (id bigint PRIMARY KEY, name text, email text,
    amount bigint, signup date, city text, note text);
"""


def table_plan() -> dict:
    """Sandbox-table ingest -> normalize_whitespace -> table export keyed by id."""
    plan = import_plan(jsonl=False)
    plan["steps"][0]["config"] = {"source": "table", "table": SOURCE_TABLE}
    return plan


def executor_peaks(topo: Topology) -> dict[str, float]:
    """Peak RSS (MiB) of every executor incarnation of the topology so far."""
    return {
        m["process"]: m["peak_rss_mib"]
        for m in topo.sampler.table()
        if m["process"].startswith("executor")
    }


def part_c(repeat: int) -> None:
    """(c): the largest CSV under the limit through shape (b), against 100,000 records."""
    topo = Topology("bench-scale-c", fast=False)
    topo.prepare()
    small = generate_csv(topo.data / "small.csv", 100_000)
    per_record = small["bytes"] / small["records"]
    n = int(MAX_SOURCE_BYTES / per_record * 0.99) // 10_000 * 10_000
    big = generate_csv(topo.data / "customers.csv", n)
    while big["bytes"] > MAX_SOURCE_BYTES:
        n -= 10_000
        big = generate_csv(topo.data / "customers.csv", n)
    print(f"(c) input: {n} records, {big['bytes'] / 2**20:.1f} MiB; load {_load()}")
    figures: dict[str, list] = {"pipe": [], "base": []}
    try:
        topo.start()
        pipeline = topo.create("scale-c", import_plan(jsonl=True))
        for _ in range(repeat):
            figures["base"].append(
                baseline(topo.db_url, topo.data / "customers.csv", topo.dir / "b.jsonl")
            )
            figures["pipe"].append(run_pipeline(topo, pipeline, timeout_s=3600)[0])
    finally:
        topo.stop()
    pipe, base = statistics.median(figures["pipe"]), statistics.median(figures["base"])
    print(f"(c) {n} records, shape (b): pipeline {pipe:.2f} s (runs {_r(figures['pipe'])}), "
          f"baseline {base:.2f} s (runs {_r(figures['base'])}), ratio {pipe / base:.2f}x, "
          f"{pipe / n * 1e6:.1f} us/record")  # fmt: skip
    print(f"(c) executor peak RSS, MiB: {executor_peaks(topo)}; load after {_load()}")


def _r(values: list[float]) -> list[float]:
    return [round(v, 2) for v in values]


def load_source(topo: Topology, rows: int) -> None:
    """`sandbox.bench_source` with `rows` seeded customer rows (COPY of the seeded CSV)."""
    path = topo.dir / f"source-{rows}.csv"
    generate_csv(path, rows)
    topo.sql(SOURCE_DDL)
    conn = connect(topo.db_url, "etl-bench-scale")
    try:
        with conn.cursor() as cur, path.open(encoding="utf-8") as f:
            cur.copy_expert(
                f"COPY sandbox.{SOURCE_TABLE} FROM STDIN WITH (FORMAT csv, HEADER true)", f
            )
        conn.commit()
    finally:
        conn.close()
    path.unlink()


def table_run(rows: int, *, kill: bool) -> dict:
    """One (d) run on a fresh topology: seconds, executor peaks, and with `kill` the
    recovery checks."""
    topo = Topology(f"bench-scale-d{rows}", fast=False)
    topo.prepare()
    result: dict = {"rows": rows}
    try:
        topo.start()
        load_source(topo, rows)
        pipeline = topo.create("scale-d", table_plan())
        if not kill:
            result["seconds"], run = run_pipeline(topo, pipeline, timeout_s=3600)
        else:
            run = _killed_run(topo, pipeline, rows, result)
        result["steps_s"] = {
            s["name"]: round(_seconds(s["started_at"], s["finished_at"]), 2) for s in run["steps"]
        }
        query = (
            "SELECT count(*), count(DISTINCT record_key), count(DISTINCT id)"
            " FROM sandbox.customers WHERE run_id = %s"
        )
        result["rows_out, distinct keys, distinct ids"] = topo.sql(query, run["id"])[0]
    finally:
        topo.stop()
    result["executor_peak_rss_mib"] = executor_peaks(topo)
    return result


def _killed_run(topo: Topology, pipeline: str, rows: int, result: dict) -> dict:
    """Trigger, SIGKILL the executor of the table export half-way through it, wait."""
    batches = -(-rows // BATCH_SIZE)
    started = time.perf_counter()
    code, run = topo.trigger(pipeline)
    assert code == 201, run
    query = (
        "SELECT executor FROM attempts WHERE run_id = %s AND step_name = 'to_table'"
        " AND outcome IS NULL AND executor IS NOT NULL AND batches_done >= %s"
    )
    found = topo.wait_for(
        lambda: topo.sql(query, run["id"], batches // 2), timeout=3600, what="half the export"
    )
    result["killed"] = topo.kill_role(found[0][0].split(":")[0])
    run = topo.wait_run(run["id"], timeout=3600)
    result["seconds"] = time.perf_counter() - started
    result["status"] = run["status"]
    done = [
        r[0]
        for r in topo.sql(
            "SELECT batches_done FROM attempts WHERE run_id = %s AND step_name = 'to_table'"
            " ORDER BY number",
            run["id"],
        )
    ]
    result["to_table batches_done per attempt"] = done
    result["committed batches redone"] = sum(done) - batches
    if run["status"] != RunStatus.SUCCEEDED:
        raise SystemExit(f"killed run {run['id']} ended {run['status']}: {run}")
    return run


def _seconds(a: str | None, b: str | None) -> float:
    return seconds(a, b) or 0.0


def part_d() -> None:
    """(d): 100,000 and 1,000,000 table rows, then 1,000,000 with a kill."""
    print(f"(d) load {_load()}")
    for rows, kill in ((100_000, False), (1_000_000, False), (1_000_000, True)):
        result = table_run(rows, kill=kill)
        print(f"(d) {'killed ' if kill else ''}{rows} rows: {result}", flush=True)
    print(f"(d) load after {_load()}")


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--part", choices=("c", "d", "both"), default="both")
    parser.add_argument("--repeat", type=int, default=3, help="(c) runs (median)")
    args = parser.parse_args()
    if args.part in ("c", "both"):
        part_c(args.repeat)
    if args.part in ("d", "both"):
        part_d()
    return 0


if __name__ == "__main__":
    sys.exit(main())
