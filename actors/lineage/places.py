"""Where a process's files and tables are, as lineage datasets name them (`actors.datasets`),
and the sandbox's address from its connection URL."""

from __future__ import annotations

from psycopg2.extensions import parse_dsn

from actors.datasets import Places as Places
from actors.datasets import Sandbox


def sandbox_of(url: str) -> Sandbox:
    """The sandbox's address as datasets name it, from its connection URL or DSN. A
    multi-host URL (a primary and its replicas) names the first host of its list: the same
    name whichever of them is the primary, before and after a failover."""
    dsn = parse_dsn(url)
    return Sandbox(
        host=(dsn.get("host") or "localhost").split(",")[0],
        port=int((dsn.get("port") or "5432").split(",")[0] or 5432),
        database=dsn.get("dbname") or dsn.get("user") or "postgres",
    )
