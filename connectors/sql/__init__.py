"""The connectors' named SQL queries (`queries.sql`), loaded once."""

from pathlib import Path

from ddl import load_queries

QUERIES = load_queries(Path(__file__).with_name("queries.sql"))

__all__ = ["QUERIES"]
