"""`etl migrate` and `etl seed`: the schema and the admin's token, run against the
configured database (the work is in `ddl` and `service.domain.principals`). Every other
token is managed through the REST API (`etl token`, service/client)."""

from __future__ import annotations

import argparse
import sys

import ddl
from service.config import Config, ConfigError
from service.domain.db import Database
from service.domain.principals import ADMIN, SeedOutcome, chosen_token_problem, seed_admin


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
    """Create or restore the `pipeline_admin` principal, never expiring. With ETL_ADMIN_TOKEN
    that token is used (re-seeding with the same token changes nothing, unless it expires);
    without it a token is generated and printed once, and a live admin is left alone."""
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
    if outcome == SeedOutcome.TOKEN_RETIRED:
        # exit 0: a restart with the old ETL_ADMIN_TOKEN still starts (compose seeds first)
        print(
            f"warning: ETL_ADMIN_TOKEN was revoked or rotated away and is never accepted"
            f" again; {ADMIN} is left as it is (set a new ETL_ADMIN_TOKEN to replace it)",
            file=sys.stderr,
        )
        return 0
    if outcome == SeedOutcome.UNCHANGED:
        if cfg.admin_token is None:
            print(f"{ADMIN} exists; token unchanged (set ETL_ADMIN_TOKEN to replace it)")
        else:
            print(f"{ADMIN} already seeded with this token")
    elif outcome == SeedOutcome.RESTORED:
        print(f"{ADMIN} seeded from ETL_ADMIN_TOKEN (its expiry removed)")
    elif shown is not None:
        print(f"{ADMIN} token (shown once): {shown}")
    else:
        print(f"{ADMIN} seeded from ETL_ADMIN_TOKEN")
    return 0
