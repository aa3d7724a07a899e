"""The schema: numbered migrations (state, broker, sandbox) and their runner; the named-SQL
loader and the one way to open a connection, which every layer above uses."""

from ddl.connect import (
    Connection,
    connect,
    connection_kwargs,
    connection_lost,
    connector,
    wait,
)
from ddl.migrate import (
    DatabaseNotUtf8,
    MigrationError,
    apply_migrations,
    check_utf8,
    create_database_if_missing,
    migrate,
)
from ddl.queries import load_queries

__all__ = [
    "Connection",
    "DatabaseNotUtf8",
    "MigrationError",
    "apply_migrations",
    "check_utf8",
    "connect",
    "connection_kwargs",
    "connection_lost",
    "connector",
    "create_database_if_missing",
    "load_queries",
    "migrate",
    "wait",
]
