"""The engine's named SQL queries, each file loaded once: `queries.sql` (the advancer,
leases, checkpoints, the sweep), `lineage.sql` (what the lineage emitter reads) and
`tracing.sql` (what the engine's spans read)."""

from pathlib import Path

from ddl import load_queries

QUERIES = load_queries(Path(__file__).with_name("queries.sql"))
LINEAGE_QUERIES = load_queries(Path(__file__).with_name("lineage.sql"))
TRACING_QUERIES = load_queries(Path(__file__).with_name("tracing.sql"))

__all__ = ["LINEAGE_QUERIES", "QUERIES", "TRACING_QUERIES"]
