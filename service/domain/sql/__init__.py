"""The coordinator's named SQL queries, loaded once: `queries.sql` (API, admission),
`listing.sql` (the keyset lists), `metrics.sql` (the /metrics collector),
`schedules.sql` (the scheduler), `webhooks.sql` (webhooks and their outbox),
`backfills.sql` (backfills and the admission of their values), `watches.sql` (file-arrival
schedules and the admission of their files) and `cursors.sql` (the marks of incremental table
ingest)."""

from pathlib import Path

from ddl import load_queries

_HERE = Path(__file__).parent
QUERIES = load_queries(_HERE / "queries.sql")
SCHEDULE_QUERIES = load_queries(_HERE / "schedules.sql")
LISTING_QUERIES = load_queries(_HERE / "listing.sql")
METRICS_QUERIES = load_queries(_HERE / "metrics.sql")
WEBHOOK_QUERIES = load_queries(_HERE / "webhooks.sql")
BACKFILL_QUERIES = load_queries(_HERE / "backfills.sql")
WATCH_QUERIES = load_queries(_HERE / "watches.sql")
CURSOR_QUERIES = load_queries(_HERE / "cursors.sql")

__all__ = [
    "BACKFILL_QUERIES",
    "CURSOR_QUERIES",
    "LISTING_QUERIES",
    "METRICS_QUERIES",
    "QUERIES",
    "SCHEDULE_QUERIES",
    "WATCH_QUERIES",
    "WEBHOOK_QUERIES",
]
