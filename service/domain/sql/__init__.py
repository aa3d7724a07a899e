"""The coordinator's named SQL queries, loaded once into one dict, `QUERIES`, and called by
name (`service.domain.db.execute`, `fetch_one`, `fetch_all`): `queries.sql` (API,
admission), `listing.sql` (the keyset lists), `metrics.sql` (the /metrics collector and the
processes' own metrics), `schedules.sql` (the scheduler), `webhooks.sql` (webhooks and
their outbox), `backfills.sql` (backfills and the admission of their values),
`watches.sql` (file-arrival schedules and the admission of their files) and `cursors.sql`
(the marks of incremental table ingest). A name is unique across the files."""

from pathlib import Path

from ddl import load_queries

_HERE = Path(__file__).parent
FILES = (
    "queries",
    "listing",
    "metrics",
    "schedules",
    "webhooks",
    "backfills",
    "watches",
    "cursors",
)


def load_all(directory: Path = _HERE, files: tuple[str, ...] = FILES) -> dict[str, str]:
    """The blocks of `files` (`NAME.sql` in `directory`) in one dict; `ValueError` for a
    name defined twice, in one file or in two."""
    queries: dict[str, str] = {}
    for name in files:
        path = directory / f"{name}.sql"
        for query, sql in load_queries(path).items():
            if query in queries:
                raise ValueError(f"{path}: query {query!r} is also defined in another file")
            queries[query] = sql
    return queries


QUERIES = load_all()

__all__ = ["FILES", "QUERIES"]
