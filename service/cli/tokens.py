"""`etl token`: `create` on the server host, and every action through the REST API.

`etl token create --role ROLE --name NAME` keeps its first meaning: with no `ETL_TOKEN` it
runs on the server host, against the configured database, as the admin whose token is
`ETL_ADMIN_TOKEN` (set as for `etl seed`), and prints the new token alone on stdout. With
`ETL_TOKEN` set, it and the other actions (`list`, `revoke`, `rotate`) are API client
commands (service/client/tokens.py). Either way the token is made by
`service.domain.tokens.create_token`, which writes its audit row."""

from __future__ import annotations

import argparse
import sys
import uuid

from service.client import tokens as client_tokens
from service.client.command import EXIT_USAGE, new_console
from service.config import Config

configure_token = client_tokens.configure_token

_NO_TOKEN = (
    "neither ETL_TOKEN (to go through the API) nor ETL_ADMIN_TOKEN (on the server host, as"
    " for `etl seed`) is set"
)


def run_token(args: argparse.Namespace) -> int:
    """`etl token ACTION`: `create` without `ETL_TOKEN` on the server host, else the API."""
    cfg = Config.from_env()
    if args.token_command == "create" and cfg.token is None:
        if cfg.admin_token is None:
            print(f"etl: {_NO_TOKEN}", file=sys.stderr)
            return EXIT_USAGE
        return create_on_host(args, cfg)
    return client_tokens.run_token(args)


def create_on_host(args: argparse.Namespace, cfg: Config) -> int:
    """Make a token in the configured database as the admin of `ETL_ADMIN_TOKEN`; exit 0
    (printed), 1 (refused: a live token has the name) or 2 (bad arguments, not an admin)."""
    # The server side is imported here: `etl token list` and the API path load none of it.
    from marshmallow import ValidationError

    from service.domain.db import Database
    from service.domain.principals import ADMIN, find_principal
    from service.domain.tokens import create_token
    from service.errors import ServiceError
    from service.schemas import requests, responses

    asked = {"name": args.name, "role": args.role}
    if args.expires_in is not None:
        asked["expires_in_s"] = args.expires_in
    try:
        body = requests.TokenCreateSchema().load(asked)
    except ValidationError as exc:
        print(f"etl: invalid token: {exc.messages}", file=sys.stderr)
        return EXIT_USAGE
    db = Database(cfg.database_url, max_connections=1, application_name="etl-cli")
    try:
        admin = find_principal(db, cfg.admin_token or "")
        if admin is None or admin.role != ADMIN:
            print(
                f"etl: ETL_ADMIN_TOKEN is not a live {ADMIN} token (run `etl seed` with it,"
                " or set ETL_TOKEN to go through the API)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        with db.transaction() as cur:
            issued = create_token(
                cur, str(uuid.uuid4()), body["name"], body["role"],
                body.get("expires_in_s"), admin.name, request_id=None,
            )  # fmt: skip
    except ServiceError as exc:
        print(f"etl: {exc}", file=sys.stderr)
        return 1
    finally:
        db.close()
    record = responses.ISSUED_TOKEN.dump({**issued.record, "token": issued.token})
    client_tokens.print_issued(args, new_console(), record, "created")
    return 0
