"""`etl migrate`, `etl seed` and `etl token create`: the schema and the principals, run
against the configured database (the work is in `ddl` and `service.domain.principals`)."""

from __future__ import annotations

import argparse
import sys

import ddl
from service.config import Config, ConfigError
from service.domain.db import Database
from service.domain.principals import (
    ADMIN,
    ROLES,
    SeedOutcome,
    chosen_token_problem,
    create_principal,
    generate_token,
    hash_token,
    seed_admin,
)


def run_migrate(args: argparse.Namespace) -> int:
    """Apply every pending migration (state, broker, sandbox); idempotent. A missing database
    is created as UTF-8; an existing one in another encoding is refused (exit 2)."""
    cfg = Config.from_env()
    try:
        names = ddl.migrate(cfg.database_url, cfg.sandbox_url)
    except ddl.DatabaseNotUtf8 as exc:
        print(f"etl migrate: {exc}", file=sys.stderr)
        return 2
    print(f"applied: {', '.join(names)}" if names else "up to date")
    return 0


def run_seed(args: argparse.Namespace) -> int:
    """Create the `pipeline_admin` principal. With ETL_ADMIN_TOKEN that token is used (and
    re-seeding with the same token changes nothing); without it a token is generated and
    printed once, and an existing admin is left alone."""
    cfg = Config.from_env()
    problem = None if cfg.admin_token is None else chosen_token_problem(cfg.admin_token)
    if problem is not None:
        raise ConfigError(f"ETL_ADMIN_TOKEN {problem}; nothing was changed")
    db = Database(cfg.database_url, max_connections=1, application_name="etl-cli")
    try:
        with db.transaction() as cur:
            outcome, shown = seed_admin(cur, cfg.admin_token)
    finally:
        db.close()
    if outcome == SeedOutcome.TOKEN_TAKEN:
        print("error: that token already belongs to another principal", file=sys.stderr)
        return 1
    if outcome == SeedOutcome.UNCHANGED:
        if cfg.admin_token is None:
            print(f"{ADMIN} exists; token unchanged (set ETL_ADMIN_TOKEN to replace it)")
        else:
            print(f"{ADMIN} already seeded with this token")
    elif shown is not None:
        print(f"{ADMIN} token (shown once): {shown}")
    else:
        print(f"{ADMIN} seeded from ETL_ADMIN_TOKEN")
    return 0


def configure_token(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="token_command", required=True)
    create = sub.add_parser("create", help="create a principal and print its new token")
    create.add_argument("--role", required=True, choices=ROLES)
    create.add_argument("--name", required=True)


def run_token(args: argparse.Namespace) -> int:
    """`etl token create`: a new principal with a generated token, printed once."""
    cfg = Config.from_env()
    token = generate_token()
    db = Database(cfg.database_url, max_connections=1, application_name="etl-cli")
    try:
        with db.transaction() as cur:
            created = create_principal(cur, args.name, args.role, hash_token(token))
    finally:
        db.close()
    if created is None:
        print(f"error: a principal named {args.name!r} exists", file=sys.stderr)
        return 1
    print(token)
    return 0
