"""Where a process's files and tables are (`Places`, `Sandbox`), and how lineage datasets name
a file and a sandbox table: what the OpenLineage events (`actors.lineage`) and the lineage
facets of export targets and ingest sources (`actors.targets`, `actors.sources`) share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import connectors


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


def file_dataset(path: Path) -> tuple[str, str]:
    """The (namespace, name) of a file: `file` and its absolute path."""
    from openlineage.client.naming.dataset import LocalFileSystem  # slow to import: only when named

    naming = LocalFileSystem(path=str(Path(path).absolute()))
    return naming.get_namespace(), naming.get_name()


def table_dataset(sandbox: Sandbox, table: str) -> tuple[str, str]:
    """The (namespace, name) of a sandbox table: `postgres://host:port`, `db.schema.table`."""
    from openlineage.client.naming.dataset import Postgres

    naming = Postgres(
        host=sandbox.host,
        port=str(sandbox.port),
        database=sandbox.database,
        schema=connectors.SANDBOX_SCHEMA,
        table=table,
    )
    return naming.get_namespace(), naming.get_name()
