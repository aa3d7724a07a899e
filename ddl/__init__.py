"""The schema: numbered migrations (state, broker, sandbox) and their runner; the named-SQL
loader, the one way to open a connection and the one way to keep a session (reopened once
lost), which every layer above uses."""

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
from ddl.session import Cursor, KeptSession, one_transaction

__all__ = [
    "MIGRATIONS_DIR",
    "SANDBOX_DIR",
    "Connection",
    "Cursor",
    "DatabaseNotUtf8",
    "DatabaseUnreachable",
    "KeptSession",
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
    "one_transaction",
    "pending_migrations",
    "wait",
]
