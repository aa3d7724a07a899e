"""`python -m bench.peers_100k [--repeat 5]`: the 100,000-record chain (the seeded CSV of
`bench.import_100k`: parse, type, normalise the white space of `name` and `note`, upsert into
PostgreSQL by `id`) done by the platform and by the tools a data engineer picks instead, in
the same run, interleaved round by round so that a change of the machine's load hits all.

Contenders, each with a target table of its own in the topology's database:
- the platform: POST trigger -> the run's `finished_at` (`import_plan(jsonl=False)`: ingest ->
  normalize_whitespace -> table export, key `id`; checkpoints per 500 records);
- `psql`: `\\copy` into a temp table, then one `INSERT .. SELECT .. ON CONFLICT` doing the
  normalisation in SQL, one session (the floor: no checkpoint, one transaction);
- DuckDB: typed `read_csv` -> SQL -> the attached PostgreSQL (the `postgres` extension, from
  the `duckdb-ext-postgres` package): a staging table, then one upsert in PostgreSQL;
- polars + ADBC: typed `read_csv` -> string expressions -> `adbc_ingest` into a temp table ->
  one upsert.

Each round runs every contender once; a warm-up round first (not counted) fills every table,
so every counted round updates 100,000 existing rows. Printed: medians of `--repeat` rounds
with their range, and the platform's time over each peer's, per round (median, range). At the
end every table is compared with the platform's (rows and an md5 over them in `id` order).
`--before DIR` runs a second platform from another tree (`git archive REV | tar -x -C DIR`)
as one more contender, `before`, so a change is measured against its baseline in the same
run. The peers need the `bench` extra (`pip install -e '.[bench]'`); a missing one is skipped
with the command that installs it. Not a test: nothing here asserts."""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.import_100k import RECORDS, run_pipeline
from ddl import connect
from drills.topology import Topology
from drills.workload import generate_csv, import_plan

COLUMNS_SQL = (
    "id bigint PRIMARY KEY, name text, email text, amount bigint, signup date, city text, note text"
)
UPDATE_SET = (
    "name = EXCLUDED.name, email = EXCLUDED.email, amount = EXCLUDED.amount,"
    " signup = EXCLUDED.signup, city = EXCLUDED.city, note = EXCLUDED.note"
)
# `" ".join(s.split())` (the platform's normalize_whitespace) for ASCII white space
NORMALISED = "btrim(regexp_replace({0}, '\\s+', ' ', 'g'))"
SELECT_NORMALISED = (
    f"id, {NORMALISED.format('name')}, email, amount, signup, city, {NORMALISED.format('note')}"
)
INSTALL = "pip install -e '.[bench]'"


def psql_floor(db_url: str, csv_path: Path) -> float:
    """`psql`: `\\copy` into a temp table + one INSERT .. ON CONFLICT, one session."""
    script = "\n".join([
        "\\set ON_ERROR_STOP on",
        "BEGIN;",
        f"CREATE TEMP TABLE stage ({COLUMNS_SQL.replace(' PRIMARY KEY', '')}) ON COMMIT DROP;",
        f"\\copy stage FROM '{csv_path}' WITH (FORMAT csv, HEADER true)",
        f"INSERT INTO peer_psql SELECT {SELECT_NORMALISED} FROM stage"
        f" ON CONFLICT (id) DO UPDATE SET {UPDATE_SET};",
        "COMMIT;",
    ])  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(
        ["psql", "-q", "-X", db_url], input=script, text=True, capture_output=True
    )
    if done.returncode:
        raise RuntimeError(f"psql: {done.stderr.strip()}")
    return time.perf_counter() - started


def duckdb_script(db_url: str, csv_path: Path) -> float:
    """DuckDB: typed `read_csv`, the normalisation in SQL, a staging table in the attached
    PostgreSQL, one upsert there."""
    import duckdb

    started = time.perf_counter()
    con = duckdb.connect()
    con.execute(f"LOAD '{_duckdb_postgres_extension()}'")
    con.execute(f"ATTACH '{db_url}' AS pg (TYPE postgres)")
    con.execute(
        "CREATE OR REPLACE TABLE pg.public.peer_duckdb_stage AS"
        f" SELECT {SELECT_NORMALISED.replace('btrim', 'trim')} FROM read_csv(?, header = true,"
        " columns = {'id': 'BIGINT', 'name': 'VARCHAR', 'email': 'VARCHAR', 'amount': 'BIGINT',"
        " 'signup': 'DATE', 'city': 'VARCHAR', 'note': 'VARCHAR'})",
        [str(csv_path)],
    )
    con.execute(
        "CALL postgres_execute('pg', 'BEGIN; INSERT INTO peer_duckdb SELECT * FROM"
        f" peer_duckdb_stage ON CONFLICT (id) DO UPDATE SET {UPDATE_SET};"
        " DROP TABLE peer_duckdb_stage; COMMIT')"
    )
    con.close()
    return time.perf_counter() - started


def _duckdb_postgres_extension() -> Path:
    """The `postgres` extension shipped by the `duckdb-ext-postgres` package (DuckDB would
    otherwise download it)."""
    import duckdb
    import duckdb_ext

    root = Path(next(iter(duckdb_ext.__path__)))
    return root / "extensions" / f"v{duckdb.__version__}" / "linux_amd64" / (
        "postgres_scanner.duckdb_extension"
    )  # fmt: skip


def polars_script(db_url: str, csv_path: Path) -> float:
    """polars + ADBC: typed `read_csv`, string expressions, `adbc_ingest` into a temp table,
    one upsert."""
    import adbc_driver_postgresql.dbapi
    import polars as pl

    started = time.perf_counter()
    frame = pl.read_csv(
        csv_path, schema_overrides={"id": pl.Int64, "amount": pl.Int64, "signup": pl.Date}
    ).with_columns(
        pl.col("name", "note").str.replace_all(r"\s+", " ").str.strip_chars(" ")
    )  # fmt: skip
    with adbc_driver_postgresql.dbapi.connect(db_url) as conn, conn.cursor() as cur:
        cur.adbc_ingest("peer_polars_stage", frame.to_arrow(), mode="replace", temporary=True)
        cur.execute(
            f"INSERT INTO peer_polars SELECT * FROM peer_polars_stage"
            f" ON CONFLICT (id) DO UPDATE SET {UPDATE_SET}"
        )
        conn.commit()
    return time.perf_counter() - started


# peer -> (its script, the modules it needs)
PEERS: dict[str, tuple[Callable[[str, Path], float], tuple[str, ...]]] = {
    "psql": (psql_floor, ()),
    "duckdb": (duckdb_script, ("duckdb", "duckdb_ext")),
    "polars": (polars_script, ("polars", "pyarrow", "adbc_driver_postgresql")),
}


def available_peers(wanted: list[str]) -> list[str]:
    """The peers in `wanted` whose modules are installed; says what to install for the rest."""
    found = []
    for name in wanted:
        missing = [m for m in PEERS[name][1] if importlib.util.find_spec(m) is None]
        if missing:
            print(f"skipped {name}: {', '.join(missing)} not installed ({INSTALL})")
        else:
            found.append(name)
    return found


def rounds(platforms: dict[str, Topology], peers: list[str], repeat: int) -> dict[str, list]:
    """A warm-up round, then `repeat` rounds of every contender: {contender: [seconds]}.
    The peers load into the first platform's database."""
    topo = platforms["platform"]
    csv_path = topo.data / "customers.csv"
    conn = connect(topo.db_url, "etl-bench-peers")
    with conn.cursor() as cur:
        for name in peers:
            cur.execute(
                f"DROP TABLE IF EXISTS peer_{name}; CREATE TABLE peer_{name} ({COLUMNS_SQL})"
            )
    conn.commit()
    conn.close()
    runs = {
        name: partial(run_pipeline, t, t.create("peers-chain", import_plan(jsonl=False)))
        for name, t in platforms.items()
    }
    times: dict[str, list[float]] = {name: [] for name in [*platforms, *peers]}
    for round_no in range(repeat + 1):
        for contender in times:
            if contender in runs:
                elapsed = runs[contender]()[0]
            else:
                elapsed = _retried(PEERS[contender][0], topo.db_url, csv_path)
            if round_no:  # round 0 is the warm-up
                times[contender].append(elapsed)
    return times


def _retried(script: Callable[..., Any], *args: Any) -> Any:
    """`script(*args)`, again after a pause while the shared server refuses a connection
    ("too many clients": other work on the machine); says so when it happens."""
    for attempt in range(1, 6):
        try:
            return script(*args)
        except Exception as exc:
            if "too many clients" not in str(exc) or attempt == 5:
                raise
            print(f"{script.__name__}: the server refused a connection, again in 3 s")
            time.sleep(3)
    raise AssertionError("unreachable")


def report(times: dict[str, list[float]]) -> None:
    print(f"\n{'contender':<12}{'median s':>10}  {'range':<16}{'platform / it':>15}  range")
    platform = times["platform"]
    for name, runs in times.items():
        ratios = [p / t for p, t in zip(platform, runs, strict=True)]
        print(
            f"{name:<12}{statistics.median(runs):>10.3f}  "
            f"{min(runs):.3f} .. {max(runs):.3f}  {statistics.median(ratios):>12.2f}x  "
            f"{min(ratios):.2f} .. {max(ratios):.2f}"
        )
    for name, runs in times.items():
        print(f"  {name} runs: {[round(t, 3) for t in runs]}")


def same_rows(topo: Topology, peers: list[str]) -> None:
    """Every peer's table against the platform's last run in `sandbox.customers`: rows and
    md5 over them in `id` order."""
    digest = (
        "SELECT count(*), md5(string_agg(row(id, name, email, amount, signup, city, note)::text,"
        " '|' ORDER BY id)) FROM {}"
    )
    # the platform's table holds each run's rows under its run_id: the last run's
    last_run = "(SELECT id::text FROM runs ORDER BY created_at DESC LIMIT 1)"
    expected = topo.sql(digest.format(f"sandbox.customers WHERE run_id::text = {last_run}"))[0]
    print(f"\nplatform table, last run: {expected[0]} rows, md5 {expected[1]}")
    for name in peers:
        got = topo.sql(digest.format(f"peer_{name}"))[0]
        print(f"  {name}: {'the same rows' if got == expected else f'DIFFERENT: {got}'}")


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers_100k", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=5, help="counted rounds (medians)")
    parser.add_argument("--peers", nargs="*", choices=tuple(PEERS), default=list(PEERS))
    parser.add_argument(
        "--before",
        type=Path,
        help="another tree (`git archive REV | tar -x -C DIR`) run as a second platform",
    )
    args = parser.parse_args()
    peers = available_peers(args.peers)
    platforms = {"platform": Topology("bench-peers", fast=False)}
    if args.before:  # its processes import the other tree first (no cwd on sys.path)
        env = {"PYTHONSAFEPATH": "1", "PYTHONPATH": str(args.before.resolve())}
        platforms["before"] = Topology("bench-peers-before", fast=False, env=env)
    for topo in platforms.values():
        topo.prepare()
        info = generate_csv(topo.data / "customers.csv", RECORDS)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"input: {info['records']} records, {info['bytes'] / 2**20:.1f} MiB, "
          f"{info['multiline']} multi-line; {args.repeat} rounds; load {load}")  # fmt: skip
    try:
        for topo in platforms.values():
            topo.start()
        times = rounds(platforms, peers, args.repeat)
        report(times)
        _retried(same_rows, platforms["platform"], peers)
    finally:
        for topo in platforms.values():
            topo.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
