"""The schema: numbered migrations (state, broker, sandbox), their runner, the SQL loader."""

from ddl.migrate import MigrationError, apply_migrations, create_database_if_missing, migrate
from ddl.queries import load_queries

__all__ = [
    "MigrationError",
    "apply_migrations",
    "create_database_if_missing",
    "load_queries",
    "migrate",
]
