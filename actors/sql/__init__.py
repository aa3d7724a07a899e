"""The engine's named SQL queries (`queries.sql`), and the lineage emitter's
(`lineage.sql`), each loaded once."""

from pathlib import Path

from ddl import load_queries

QUERIES = load_queries(Path(__file__).with_name("queries.sql"))
LINEAGE_QUERIES = load_queries(Path(__file__).with_name("lineage.sql"))

__all__ = ["LINEAGE_QUERIES", "QUERIES"]
