"""The engine's named SQL queries, loaded once: `queries.sql` (the advancer, leases,
checkpoints, the sweep) and `tracing.sql` (what the engine's spans read)."""

from pathlib import Path

from ddl import load_queries

QUERIES = load_queries(Path(__file__).with_name("queries.sql"))
TRACING_QUERIES = load_queries(Path(__file__).with_name("tracing.sql"))

__all__ = ["QUERIES", "TRACING_QUERIES"]
