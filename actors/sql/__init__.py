"""The engine's named SQL queries, each file loaded once: `queries.sql` (the advancer,
leases, checkpoints, the sweep), `lineage.sql` (what the lineage emitter reads),
`tracing.sql` (what the engine's spans read), `checks.sql` (a step's data checks) and
`cursors.sql` (the ranges and marks of incremental table ingest)."""

from pathlib import Path

from ddl import load_queries

QUERIES = load_queries(Path(__file__).with_name("queries.sql"))
CURSOR_QUERIES = load_queries(Path(__file__).with_name("cursors.sql"))
CHECK_QUERIES = load_queries(Path(__file__).with_name("checks.sql"))
LINEAGE_QUERIES = load_queries(Path(__file__).with_name("lineage.sql"))
TRACING_QUERIES = load_queries(Path(__file__).with_name("tracing.sql"))

__all__ = ["CHECK_QUERIES", "CURSOR_QUERIES", "LINEAGE_QUERIES", "QUERIES", "TRACING_QUERIES"]
