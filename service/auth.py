"""Bearer tokens and roles.

Only the sha256 hex of a token is stored (`principals.token_hash`). Each resource declares
which roles may call each HTTP method (`roles = {"GET": READ, ...}`); the middleware answers
401 (with `WWW-Authenticate: Bearer`) for a missing or unknown token and 403 for a role that
may not make the call, before any body is read."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from service.db import fetch_one
from service.errors import Forbidden, Unauthorized

if TYPE_CHECKING:
    import falcon

    from service.db import Database

ADMIN = "pipeline_admin"
OPERATOR = "pipeline_operator"
VIEWER = "pipeline_viewer"
ROLES = (ADMIN, OPERATOR, VIEWER)

# Who may do what: admins everything, operators reads + trigger/cancel/resume, viewers reads.
ADMIN_ONLY = frozenset({ADMIN})
OPERATE = frozenset({ADMIN, OPERATOR})
READ = frozenset(ROLES)
# A chosen admin token (ETL_ADMIN_TOKEN) must be at least this long and free of white space.
MIN_CHOSEN_TOKEN_CHARS = 16


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    id: str
    name: str
    role: str


def generate_token() -> str:
    """A new random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def chosen_token_problem(token: str) -> str | None:
    """Why a token chosen by a person (`ETL_ADMIN_TOKEN`) cannot be used, or None. White
    space is refused because a client strips it from a header (a whitespace-only token
    could never be presented, locking the admin out)."""
    if any(c.isspace() for c in token):
        return "must not contain white space"
    if len(token) < MIN_CHOSEN_TOKEN_CHARS:
        return f"must be at least {MIN_CHOSEN_TOKEN_CHARS} characters, got {len(token)}"
    return None


def hash_token(token: str) -> str:
    """The sha256 hex digest stored for `token`."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def find_principal(db: Database, token: str) -> Principal | None:
    """The principal owning `token`, or None. The lookup is by hash; the stored hash is then
    compared in constant time so a match never depends on a short-circuiting `==`."""
    wanted = hash_token(token)
    with db.transaction() as cur:
        row = fetch_one(cur, "find_principal_by_token_hash", {"token_hash": wanted})
    if row is None or not hmac.compare_digest(row["token_hash"], wanted):
        return None
    return Principal(id=str(row["id"]), name=row["name"], role=row["role"])


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


class AuthMiddleware:
    """Authenticates every routed request to a non-public resource and checks its role.

    A resource is public when it sets `public = True`; otherwise `roles` maps each HTTP
    method it serves to the roles allowed. A method missing from `roles` is left to falcon
    (405). Unrouted requests (resource None) fall through to falcon's 404."""

    def __init__(self, db: Database):
        self.db = db

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict
    ) -> None:
        if resource is None or getattr(resource, "public", False):
            return
        token = bearer_token(req.get_header("Authorization"))
        principal = find_principal(self.db, token) if token else None
        if principal is None:
            raise Unauthorized()
        req.context.principal = principal
        allowed = getattr(resource, "roles", {}).get(req.method)
        if allowed is not None and principal.role not in allowed:
            raise Forbidden(f"role {principal.role} may not {req.method} {req.path}")
