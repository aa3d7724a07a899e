"""`python -m bench.flights_duckdb [--repeat 5]`: the 11-step nycflights13 plan of
`bench.real_dag` (`PLAN`) done by the platform, by its pandas + COPY script
(`real_dag.pandas_script`) and by the same plan written for DuckDB, in the same rounds. Not
a test: nothing here asserts.

The DuckDB script (`duckdb_script`) does each step of the plan as SQL on the same
`flights.csv`: `read_csv` twice (`nullstr = 'NA'`, types detected), the map of `origin` to a
name (a `CASE`, `other` by default), both aggregates (`count(*)`, `sum`, `min`, `max` per
group, as the platform's `aggregate`), the filter on `JFK`, both tables into the attached
PostgreSQL (the `postgres` extension of the `duckdb-ext-postgres` package, `CREATE OR
REPLACE TABLE .. AS`: binary COPY) and the three files (`COPY .. TO`: two CSV files and
one JSON Lines file).

Each round runs the platform (the plan's two sandbox tables emptied first; POST trigger ->
the run's `finished_at`, two executors, production timings), then pandas, then DuckDB. A
warm-up round first, not counted. Printed: medians of the rounds with their range, and the
ratios of each pair per round (median, range); at the end the rows of each contender's two
tables. Needs the `bench` extra (`pip install -e '.[bench]'`). `--private-cluster`
puts the topology and both scripts on a PostgreSQL cluster of the bench's own
(`drills.pgcluster`: `fsync=off`, 200 sessions), for a shared server out of sessions."""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

from bench.import_100k import _load, run_pipeline
from bench.peers_100k import _duckdb_postgres_extension, _retried
from bench.real_dag import AIRPORTS, PLAN, _empty_tables, pandas_script, spread
from drills.datasets import flights_csv
from drills.pgcluster import PrivateCluster
from drills.topology import Topology

ORIGIN_NAME = (
    "CASE origin "
    + " ".join(f"WHEN '{code}' THEN '{name}'" for code, name in AIRPORTS.items())
    + " ELSE 'other' END AS origin_name"
)
AGGREGATE = "count(*) AS count, sum({0}) AS sum, min({0}) AS min, max({0}) AS max"


def duckdb_script(path: Path, db_url: str, out: Path) -> float:
    """The same work as `PLAN` with DuckDB; its wall time in seconds."""
    import duckdb

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    con = duckdb.connect()
    con.execute(f"LOAD '{_duckdb_postgres_extension()}'")
    con.execute(f"ATTACH '{db_url}' AS pg (TYPE postgres)")
    read = "read_csv(?, header = true, nullstr = 'NA')"
    con.execute(f"CREATE TEMP TABLE a AS SELECT *, {ORIGIN_NAME} FROM {read}", [str(path)])
    con.execute(
        f"COPY (SELECT origin_name, {AGGREGATE.format('dep_delay')} FROM a"
        " GROUP BY origin_name) TO ? (FORMAT csv, HEADER)",
        [str(out / "by_origin.csv")],
    )
    con.execute("CREATE OR REPLACE TABLE pg.public.bench_dd_flights AS SELECT * FROM a")
    con.execute(f"CREATE TEMP TABLE b AS SELECT * FROM {read}", [str(path)])
    con.execute("CREATE TEMP TABLE jfk AS SELECT * FROM b WHERE origin = 'JFK'")
    con.execute("CREATE OR REPLACE TABLE pg.public.bench_dd_jfk AS SELECT * FROM jfk")
    con.execute("COPY jfk TO ? (FORMAT json)", [str(out / "jfk.jsonl")])
    con.execute(
        f"COPY (SELECT carrier, {AGGREGATE.format('arr_delay')} FROM b GROUP BY carrier)"
        " TO ? (FORMAT csv, HEADER)",
        [str(out / "by_carrier.csv")],
    )
    con.close()
    return time.perf_counter() - started


def rows_of(topo: Topology) -> dict[str, tuple]:
    """Each contender's (flights rows, JFK rows)."""
    tables = {
        "platform": ("sandbox.bench_flights", "sandbox.bench_jfk"),
        "pandas": ("bench_pd_flights", "bench_pd_jfk"),
        "duckdb": ("bench_dd_flights", "bench_dd_jfk"),
    }
    return {
        name: tuple(topo.sql(f"SELECT count(*) FROM {t}")[0][0] for t in pair)
        for name, pair in tables.items()
    }


def rounds(topo: Topology, source: Path, repeat: int) -> dict[str, list[float]]:
    """A warm-up round, then `repeat` rounds of the three: {contender: [seconds]}."""
    pipeline = topo.create("real-dag", PLAN)
    times: dict[str, list[float]] = {"platform": [], "pandas": [], "duckdb": []}
    out = topo.dir / "scripts"
    for i in range(repeat + 1):
        _empty_tables(topo)
        took = {
            "platform": run_pipeline(topo, pipeline)[0],
            "pandas": _retried(pandas_script, source, topo.db_url, out / "pandas"),
            "duckdb": _retried(duckdb_script, source, topo.db_url, out / "duckdb"),
        }
        print(f"round {i or 'warm-up'}: " + ", ".join(f"{k} {v:.2f} s" for k, v in took.items())
              + f"; load {_load()}", flush=True)  # fmt: skip
        if i:
            for name, seconds in took.items():
                times[name].append(seconds)
    return times


def report(times: dict[str, list[float]], rows: dict[str, tuple]) -> None:
    print(f"\nrows (flights, JFK): {rows}; load at the end: {_load()}")
    print(f"\n| contender | seconds, median of {len(times['platform'])} (range) |")
    print("|---|---|")
    for name, runs in times.items():
        print(f"| {name} | {spread(runs)} |")
    print("\n| pair, per round | ratio, median (range) |")
    print("|---|---|")
    for a, b in (("platform", "pandas"), ("platform", "duckdb"), ("pandas", "duckdb")):
        ratios = [x / y for x, y in zip(times[a], times[b], strict=True)]
        print(f"| {a} / {b} | {spread(ratios)}x |")
    pairs = zip(times["platform"], times["pandas"], strict=True)
    ratio = statistics.median(p / q for p, q in pairs)
    print(f"\nplatform / pandas target <= 1.2x: {'met' if ratio <= 1.2 else 'MISSED'}")


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.flights_duckdb", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=5, help="counted rounds (medians)")
    parser.add_argument(
        "--private-cluster",
        action="store_true",
        help="every contender on a PostgreSQL cluster of the bench's own (fsync=off)",
    )
    args = parser.parse_args()
    source = flights_csv()
    cluster = PrivateCluster() if args.private_cluster else None
    if cluster is not None:
        cluster.start()
    topo = Topology("bench-flights-duckdb", fast=False, cluster=cluster)
    topo.prepare()
    shutil.copy(source, topo.data / "flights.csv")
    print(f"{len(PLAN['steps'])}-step plan on flights.csv ({source.stat().st_size / 2**20:.1f}"
          f" MiB); {args.repeat} rounds; load {_load()}", flush=True)  # fmt: skip
    try:
        topo.start()
        times = rounds(topo, topo.data / "flights.csv", args.repeat)
        rows = rows_of(topo)
    finally:
        topo.stop()
    report(times, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
