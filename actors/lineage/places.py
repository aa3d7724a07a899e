"""Where a process's files and tables are, as lineage datasets name them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from psycopg2.extensions import parse_dsn


@dataclass(frozen=True)
class Sandbox:
    """Where the sandbox tables live (their dataset namespace and name prefix)."""

    host: str
    port: int
    database: str


@dataclass(frozen=True)
class Places:
    """Where an executor's files and tables are: the datasets' names come from here."""

    data_dir: Path
    export_dir: Path
    reject_dir: Path
    sandbox: Sandbox


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
