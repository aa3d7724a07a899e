"""`etl token create|list|revoke|rotate` through the REST API (admin); `create` without
`ETL_TOKEN` runs on the server host instead (service/cli/tokens.py)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from rich.console import Console

from service.client.command import add_json, dispatch, err_console, print_items, print_json
from service.client.http import ApiClient

_DURATION = re.compile(r"(\d{1,10})([smhd]?)")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration_s(text: str) -> int:
    """`--expires-in`: seconds from `3600`, `3600s`, `90m`, `12h` or `30d`."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or int(match[1]) == 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration such as 3600s, 90m, 12h or 30d"
        )
    return int(match[1]) * _UNIT_S[match[2]]


def configure_token(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = sub.add_parser("create", help="a new token; prints its secret once")
    create.add_argument("--name", required=True, help="unique among live tokens")
    create.add_argument(
        "--role", required=True, help="pipeline_admin, pipeline_operator or pipeline_viewer"
    )
    create.add_argument(
        "--expires-in", type=parse_duration_s, metavar="DURATION", help="e.g. 3600s, 12h, 30d"
    )
    add_json(create)
    ls = sub.add_parser("list", help="tokens, newest first, revoked ones too (never a secret)")
    add_json(ls)
    revoke = sub.add_parser("revoke", help="revoke: its API calls and console sessions end at once")
    revoke.add_argument("token", metavar="TOKEN", help="token id, or the name of a live one")
    rotate = sub.add_parser(
        "rotate", help="a new secret for the same token (printed once); the old one ends at once"
    )
    rotate.add_argument("token", metavar="TOKEN", help="token id, or the name of a live one")
    rotate.add_argument(
        "--expires-in",
        type=parse_duration_s,
        metavar="DURATION",
        help="a new lifetime from now (default: the expiry stays)",
    )
    add_json(rotate)


def print_issued(args: argparse.Namespace, console: Console, issued: dict, what: str) -> None:
    """The secret alone on stdout (for a script to capture), what it is on stderr."""
    if args.json:
        print_json(console, issued)
        return
    expires = issued.get("expires_at") or "never"
    err_console().print(
        f"{what} token {issued['name']} ({issued['id']}), role {issued['role']},"
        f" expires {expires}; the secret below is shown this once:",
        markup=False,
    )
    print(issued["token"])


def token_create(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    issued = client.create_token(args.name, args.role, args.expires_in)
    print_issued(args, console, issued, "created")
    return 0


def token_list(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    headers = ["ID", "NAME", "ROLE", "CREATED", "LAST USED", "EXPIRES", "REVOKED"]
    return print_items(args, console, client.list_tokens(), headers, _row)


def _row(t: dict[str, Any]) -> list[Any]:
    return [
        t["id"],
        t["name"],
        t["role"],
        t["created_at"],
        t.get("last_used_at") or "-",
        t.get("expires_at") or "never",
        t.get("revoked_at") or "-",
    ]


def token_revoke(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    token = client.find_token(args.token)
    client.revoke_token(token["id"])
    print(f"revoked token {token['name']} ({token['id']})")
    return 0


def token_rotate(args: argparse.Namespace, client: ApiClient, console: Console) -> int:
    token = client.find_token(args.token)
    issued = client.rotate_token(token["id"], args.expires_in)
    print_issued(args, console, issued, "rotated")
    return 0


run_token = dispatch(
    {"create": token_create, "list": token_list, "revoke": token_revoke, "rotate": token_rotate},
    "token_command",
)
