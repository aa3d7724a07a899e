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
    MIGRATIONS_DIR,
    SANDBOX_DIR,
    DatabaseNotUtf8,
    DatabaseUnreachable,
    MigrationError,
    apply_migrations,
    check_utf8,
    create_database_if_missing,
    migrate,
    pending_migrations,
)
from ddl.queries import load_queries

__all__ = [
    "MIGRATIONS_DIR",
    "SANDBOX_DIR",
    "Connection",
    "DatabaseNotUtf8",
    "DatabaseUnreachable",
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
    "pending_migrations",
    "wait",
]
