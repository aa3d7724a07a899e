"""The coordinator's named SQL queries, loaded once: `queries.sql` (API, admission,
listing) and `schedules.sql` (the scheduler)."""

from pathlib import Path

from ddl import load_queries

_HERE = Path(__file__).parent
QUERIES = load_queries(_HERE / "queries.sql")
SCHEDULE_QUERIES = load_queries(_HERE / "schedules.sql")

__all__ = ["QUERIES", "SCHEDULE_QUERIES"]
