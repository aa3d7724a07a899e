"""Principals: the roles, their tokens and who may do what.

A principal is one token. Only the sha256 hex of a token is stored (`principals.token_hash`);
a token is shown once, when it is made. A token is live while it is neither revoked nor
expired (on the database clock); only live tokens authenticate. The faces check roles with
the sets below (`service.api.auth` for the REST API, `service.console.web` for the console).
`seed_admin` is what `etl seed` runs, in one transaction of the caller's database; the
token operations of the REST API live in `service.domain.tokens`."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from service.domain.audit import insert_audit
from service.domain.db import Cursor, execute, fetch_all, fetch_one
from service.schemas.requests import ROLE_NAMES

if TYPE_CHECKING:
    from service.domain.db import Database

ROLES = ROLE_NAMES
ADMIN, OPERATOR, VIEWER = ROLES

# Who may do what: admins everything, operators reads + trigger/cancel/resume, viewers reads.
ADMIN_ONLY = frozenset({ADMIN})
OPERATE = frozenset({ADMIN, OPERATOR})
READ = frozenset(ROLES)
SEED_PRINCIPAL = "etl seed"  # who the audit names for the admin token `etl seed` sets
# A chosen admin token (ETL_ADMIN_TOKEN) must be at least this long and free of white space.
MIN_CHOSEN_TOKEN_CHARS = 16


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    id: str
    name: str
    role: str


def new_secret() -> str:
    """A new random secret (256 bits, URL-safe base64, 43 characters): every API token,
    console session cookie and generated webhook secret."""
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


def find_principal(db: Database, token: str, *, client_addr: str | None = None) -> Principal | None:
    """The principal owning the live `token`, or None. The lookup is by hash; the stored
    hash is then compared in constant time so a match never depends on a short-circuiting
    `==`. A match clears the failed authentications of `client_addr` (the caller's address;
    see `service.domain.authfailures`) and writes the token's `last_used_at` when the stored
    one is over a minute old."""
    wanted = hash_token(token)
    params = {"token_hash": wanted, "client_addr": client_addr}
    with db.transaction() as cur:
        row = fetch_one(cur, "find_principal_by_token_hash", params)
    if row is None or not hmac.compare_digest(row["token_hash"], wanted):
        return None
    return Principal(id=str(row["id"]), name=row["name"], role=row["role"])


class SeedOutcome(StrEnum):
    """What `seed_admin` did."""

    CREATED = "created"  # a new admin principal with the token
    REPLACED = "replaced"  # the admin's token (and role) replaced by the chosen one
    RESTORED = "restored"  # the admin already had the chosen token, which expires: not anymore
    UNCHANGED = "unchanged"  # already seeded with this token, or kept (no token chosen)
    TOKEN_TAKEN = "token_taken"  # the chosen token belongs to another principal
    TOKEN_RETIRED = "token_retired"  # the chosen token was revoked or rotated away: refused


def seed_admin(cur: Cursor, token: str | None) -> tuple[SeedOutcome, str | None]:
    """Give `pipeline_admin` the chosen `token`, never expiring, or a generated one when None
    and no live admin exists (a live one is then left alone; an expired one gets the new
    token). Returns the outcome and the token to show (the generated one, once; None
    otherwise). A token that was revoked or rotated away is refused (`TOKEN_RETIRED`,
    nothing changes). Replacing the admin's token retires the old one and ends its console
    sessions at once. The caller checks a chosen token first (`chosen_token_problem`) and
    owns the transaction."""
    existing = fetch_one(cur, "find_principal_by_name", {"name": ADMIN})
    if token is None and existing is not None and not existing["expired"]:
        return SeedOutcome.UNCHANGED, None
    chosen = token or new_secret()
    hashed = hash_token(chosen)
    shown = None if token else chosen
    if existing is not None and existing["token_hash"] == hashed and existing["role"] == ADMIN:
        if existing["permanent"]:
            return SeedOutcome.UNCHANGED, None
        execute(cur, "update_principal_token", {"name": ADMIN, "role": ADMIN, "token_hash": hashed})
        _audit_seed(cur, str(existing["id"]), SeedOutcome.RESTORED, sessions_ended=0)
        return SeedOutcome.RESTORED, None
    state = fetch_one(cur, "token_hash_state", {"token_hash": hashed})
    assert state is not None
    if state["retired"]:
        return SeedOutcome.TOKEN_RETIRED, None
    if state["taken"]:
        return SeedOutcome.TOKEN_TAKEN, None
    if existing is None:
        created = create_principal(cur, ADMIN, ADMIN, hashed)
        if created is None:
            return SeedOutcome.TOKEN_TAKEN, None
        _audit_seed(cur, created, SeedOutcome.CREATED, sessions_ended=0)
        return SeedOutcome.CREATED, shown
    params = {"token_hash": existing["token_hash"], "principal_id": existing["id"]}
    execute(cur, "retire_token_hash", params)
    execute(cur, "update_principal_token", {"name": ADMIN, "role": ADMIN, "token_hash": hashed})
    ended = fetch_all(cur, "end_principal_sessions", {"principal_id": existing["id"]})
    _audit_seed(cur, str(existing["id"]), SeedOutcome.REPLACED, sessions_ended=len(ended))
    return SeedOutcome.REPLACED, shown


def _audit_seed(cur: Cursor, token_id: str, outcome: SeedOutcome, *, sessions_ended: int):
    details = {"name": ADMIN, "outcome": str(outcome), "sessions_ended": sessions_ended}
    insert_audit(
        cur,
        principal=SEED_PRINCIPAL,
        action="token.seed",
        entity_type="token",
        entity_id=token_id,
        details=details,
    )


def create_principal(cur: Cursor, name: str, role: str, token_hash: str) -> str | None:
    """A new principal with `token_hash`; its id, or None when the name or the token hash
    is taken."""
    params = {"id": str(uuid.uuid4()), "name": name, "role": role, "token_hash": token_hash}
    row = fetch_one(cur, "insert_principal", params)
    return None if row is None else params["id"]
