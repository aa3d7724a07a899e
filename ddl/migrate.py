"""The migration runner: applies `ddl/migrations/NNNN_*.sql` in order, once each.

It creates the target database if missing, serialises concurrent runners with an advisory
lock, records version + sha256 of every applied file and refuses to continue when an
applied file was edited afterwards."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2
from psycopg2 import sql

from ddl.connect import connect

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
SANDBOX_DIR = Path(__file__).with_name("sandbox")
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_LOCK_KEY = 0x45544C4D  # "ETLM": one runner at a time per database
# Whole-file checksums of earlier texts of a migration that differ from today's only in
# comments, recorded by databases migrated before checksums left comments out.
COMMENT_EDITS = {
    1: {"cc6ef4c717910b706b2243e2104b72ddb0516bcd0f01b6d98ddde708c2e7f8d3"},
}


class MigrationError(Exception):
    """A migration cannot be applied (edited after apply, bad file name, SQL error)."""


class DatabaseNotUtf8(MigrationError):
    """The state or sandbox database is not encoded UTF-8."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """SHA-256 of the statements: whole-line `--` comments and blank lines do not count,
        so a comment may be corrected in an applied migration, a statement never."""
        lines = (ln.rstrip() for ln in self.sql.splitlines())
        statements = "\n".join(ln for ln in lines if ln and not ln.lstrip().startswith("--"))
        return hashlib.sha256(statements.encode("utf-8")).hexdigest()

    @property
    def raw_checksum(self) -> str:
        """SHA-256 of the whole file, what databases migrated before 2026-12 recorded."""
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """The migrations in `directory`, ordered by version; versions are unique."""
    found: list[Migration] = []
    for path in sorted(directory.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise MigrationError(f"{path.name}: migration names look like 0001_name.sql")
        found.append(Migration(int(m.group(1)), path.name, path.read_text(encoding="utf-8")))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration versions in {directory}")
    return found


def create_database_if_missing(url: str) -> bool:
    """Create the database named in `url` when it does not exist; True if created."""
    parts = urlsplit(url)
    dbname = parts.path.lstrip("/")
    if not dbname:
        raise MigrationError(f"no database name in {url!r}")
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    conn = connect(admin_url, "etl-migrate")
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,))
            if cur.fetchone():
                return False
            try:
                _create_utf8(cur, dbname)
            except (psycopg2.errors.DuplicateDatabase, psycopg2.errors.UniqueViolation):
                return False  # another runner created it meanwhile
            return True
    finally:
        conn.close()


def _create_utf8(cur, dbname: str) -> None:
    """CREATE DATABASE as UTF-8 whatever the cluster's default (`template0`: a cluster
    initialised without a UTF-8 locale defaults to SQL_ASCII); with the C locale when the
    cluster's own locale cannot hold UTF-8."""
    create = sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(
        sql.Identifier(dbname)
    )
    try:
        cur.execute(create)
    except psycopg2.errors.InvalidParameterValue:  # the cluster's locale is not UTF-8
        cur.execute(create + sql.SQL(" LC_COLLATE 'C' LC_CTYPE 'C'"))


def check_utf8(conn) -> None:
    """`DatabaseNotUtf8` unless the database of `conn` stores UTF-8 (text a step reads may
    be any Unicode; another encoding fails every batch with a conversion error)."""
    with conn.cursor() as cur:
        cur.execute("SELECT current_database(), pg_encoding_to_char(encoding) FROM pg_database"
                    " WHERE datname = current_database()")  # fmt: skip
        name, encoding = cur.fetchone()
    if encoding != "UTF8":
        raise DatabaseNotUtf8(
            f"database {name!r} is encoded {encoding}, not UTF8: records hold any Unicode text."
            f" Create it anew as UTF-8 (CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE"
            " template0), or let `etl migrate` create a missing one"
        )


def apply_migrations(
    url: str, directory: Path = MIGRATIONS_DIR, table: str = "schema_migrations"
) -> list[str]:
    """Apply every pending migration of `directory` to the database at `url`, each in its
    own transaction; return the names applied. Safe to call twice and concurrently."""
    migrations = discover(directory)
    create_database_if_missing(url)
    conn = connect(url, "etl-migrate")
    applied_now: list[str] = []
    try:
        conn.autocommit = True
        check_utf8(conn)
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
            cur.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} ("
                    " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                ).format(sql.Identifier(table))
            )
            cur.execute(
                sql.SQL("SELECT version, name, checksum FROM {}").format(sql.Identifier(table))
            )
            done = {v: (n, c) for v, n, c in cur.fetchall()}
        for m in migrations:
            if m.version in done:
                name, checksum = done[m.version]
                if checksum not in {m.checksum, m.raw_checksum, *COMMENT_EDITS.get(m.version, ())}:
                    raise MigrationError(
                        f"{m.name}: applied as {name} with checksum {checksum[:12]}, "
                        f"the file now has {m.checksum[:12]}; applied migrations are never "
                        "edited - add a new one"
                    )
                continue
            conn.autocommit = False
            try:
                with conn.cursor() as cur:
                    cur.execute(m.sql)
                    cur.execute(
                        sql.SQL(
                            "INSERT INTO {} (version, name, checksum) VALUES (%s, %s, %s)"
                        ).format(sql.Identifier(table)),
                        (m.version, m.name, m.checksum),
                    )
                conn.commit()
            except psycopg2.Error as exc:
                conn.rollback()
                raise MigrationError(f"{m.name}: {exc}".strip()) from exc
            finally:
                conn.autocommit = True
            applied_now.append(m.name)
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    finally:
        conn.close()
    return applied_now


class DatabaseUnreachable(MigrationError):
    """The database server does not answer, or refuses the connection."""


def pending_migrations(
    url: str, directory: Path = MIGRATIONS_DIR, table: str = "schema_migrations"
) -> list[str]:
    """The migrations of `directory` not applied to the database at `url` (all of them when
    the database does not exist yet), changing nothing; `DatabaseUnreachable` when the
    server does not answer."""
    names = [m.name for m in discover(directory)]
    try:
        conn = connect(url, "etl-preflight")
    except psycopg2.OperationalError as exc:
        if _database_missing(url):
            return names
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseUnreachable(reason) from None
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))
            if not cur.fetchone()[0]:
                return names
            cur.execute(sql.SQL("SELECT name FROM {}").format(sql.Identifier(table)))
            done = {name for (name,) in cur.fetchall()}
    finally:
        conn.close()
    return [n for n in names if n not in done]


def _database_missing(url: str) -> bool:
    """Whether the server answers (through its `postgres` database) without the database
    named in `url`; False when it does not answer at all."""
    parts = urlsplit(url)
    try:
        conn = connect(urlunsplit(parts._replace(path="/postgres")), "etl-preflight")
    except psycopg2.OperationalError:
        return False
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (parts.path.lstrip("/"),))
            return cur.fetchone() is None
    finally:
        conn.close()


def migrate(database_url: str, sandbox_url: str | None = None) -> list[str]:
    """Apply the state migrations (incl. the broker's) and, to the sandbox database (the
    same one by default), the sandbox migrations. Returns the names applied."""
    names = apply_migrations(database_url, MIGRATIONS_DIR)
    names += apply_migrations(sandbox_url or database_url, SANDBOX_DIR, "sandbox_migrations")
    return names
