"""Tokens, as the admins manage them through the REST API (`/tokens`) and `etl token`: make
one (shown once), revoke one, rotate one (a new secret for the same id, name and role).

A token is a principal (`service.domain.principals`): its id is the token's id. Every
function takes the caller's cursor and runs inside the caller's transaction, writing its
audit row (`token.create`, `token.revoke`, `token.rotate`, entity `token:<id>`) there.
Revoking or rotating locks the token's row first (revoking an admin token, or giving one an
expiry, then takes the admin-tokens lock, so the last live admin token is never revoked and
the last permanent one never revoked nor expired), then ends the token's
console sessions in the same transaction; sessions are also checked against the token on
every console request (`service.domain.sessions`), so nothing signed in with an old secret
outlives the COMMIT.
A rotated-away secret is remembered (`retired_tokens`) so `etl seed` cannot bring it back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from service.domain.audit import audit_change
from service.domain.db import Cursor, execute, fetch_all, fetch_one
from service.domain.principals import ADMIN, hash_token, new_secret
from service.errors import Conflict, NotFound, ValidationFailed


@dataclass(frozen=True)
class IssuedToken:
    """A token just made or rotated: its record and the secret, to be shown once."""

    record: dict
    token: str


def create_token(
    cur: Cursor,
    token_id: str,
    name: str,
    role: str,
    expires_in_s: int | None,
    principal: str,
    *,
    request_id: str | None,
) -> IssuedToken:
    """A new token `name` with `role`, expiring `expires_in_s` seconds from now (database
    clock; None: never). `Conflict` (code `duplicate_name`) when a live token has the
    name (a revoked token's name is free); `ValidationFailed` for `pipeline_admin`, the name
    `etl seed` gives the admin's token (a token of that name would become the admin's at the
    next seed)."""
    if name == ADMIN:
        raise ValidationFailed(
            "the name is reserved",
            details=[{"field": "name", "message": f"{ADMIN} is reserved for `etl seed`"}],
        )
    secret = new_secret()
    params = {
        "id": token_id,
        "name": name,
        "role": role,
        "token_hash": hash_token(secret),
        "expires_in_s": expires_in_s,
    }
    row = fetch_one(cur, "insert_token", params)
    if row is None:
        raise Conflict(
            f"a live token named {name!r} exists",
            code="duplicate_name",
            details=[{"field": "name", "message": "is already taken"}],
        )
    details = {"name": name, "role": role, "expires_at": _iso(row["expires_at"])}
    audit_change(cur, principal, "token.create", f"token:{token_id}", request_id, **details)
    return IssuedToken(row, secret)


def revoke_token(cur: Cursor, token_id: str, principal: str, *, request_id: str | None) -> None:
    """Revoke a token at once: its API calls and its console sessions answer 401 from the
    COMMIT on. `NotFound` if unknown; revoking a revoked token changes nothing (no audit
    row). `Conflict` (code `last_admin`) for the last live admin token, or the last one that
    never expires, the caller's own included: without one nobody could manage tokens (for
    long) until an `etl seed` (rotate it instead, or make another admin token first)."""
    row = _lock(cur, token_id)
    if row["revoked_at"] is not None:
        return
    if row["role"] == ADMIN:
        _keep_an_admin(cur, row, revoking=True)
    execute(cur, "revoke_token", {"id": token_id})
    ended = fetch_all(cur, "end_principal_sessions", {"principal_id": token_id})
    audit_change(
        cur,
        principal,
        "token.revoke",
        f"token:{token_id}",
        request_id,
        name=row["name"],
        sessions_ended=len(ended),
    )


def rotate_token(
    cur: Cursor,
    token_id: str,
    expires_in_s: int | None,
    principal: str,
    *,
    request_id: str | None,
) -> IssuedToken:
    """A new secret for a live token (same id, name and role; a new lifetime when
    `expires_in_s` is given, else the old expiry stays). The old secret stops working at
    once, with the console sessions it signed in, and is never accepted again. `NotFound`
    if unknown, `Conflict` (code `token_revoked`) when revoked, `Conflict` (code
    `last_admin`) when it would give the last admin token that never expires an expiry."""
    row = _lock(cur, token_id)
    if row["revoked_at"] is not None:
        raise Conflict(f"token {token_id} is revoked; create a new one", code="token_revoked")
    if row["role"] == ADMIN and expires_in_s is not None:
        _keep_an_admin(cur, row, revoking=False)
    secret = new_secret()
    execute(cur, "retire_token_hash", {"token_hash": row["token_hash"], "principal_id": token_id})
    params = {"id": token_id, "token_hash": hash_token(secret), "expires_in_s": expires_in_s}
    execute(cur, "set_token_hash", params)
    ended = fetch_all(cur, "end_principal_sessions", {"principal_id": token_id})
    record = get_token(cur, token_id)
    audit_change(
        cur,
        principal,
        "token.rotate",
        f"token:{token_id}",
        request_id,
        name=row["name"],
        sessions_ended=len(ended),
        expires_at=_iso(record["expires_at"]),
    )
    return IssuedToken(record, secret)


def _keep_an_admin(cur: Cursor, row: dict, *, revoking: bool) -> None:
    """`Conflict` (code `last_admin`) when revoking the admin token `row` (locked) would leave
    no live admin token, or revoking it or giving it an expiry would leave no permanent one
    (an expiring admin would otherwise lock everyone out when it expires). Whoever asks."""
    execute(cur, "lock_admin_tokens", {})
    others = fetch_one(cur, "other_live_admin_tokens", {"id": row["id"], "role": ADMIN})
    assert others is not None
    if row["expires_at"] is None and others["permanent"] == 0:
        change = "revoked" if revoking else "given an expiry"
        raise Conflict(
            f"token {row['id']} is the last admin token that never expires and cannot be"
            f" {change}; make another admin token without an expiry first",
            code="last_admin",
        )
    if revoking and others["n"] == 0:
        raise Conflict(
            f"token {row['id']} is the last live admin token; make another admin token"
            " first, or rotate this one",
            code="last_admin",
        )


def get_token(cur: Cursor, token_id: str) -> dict:
    """A token's record (never its secret or hash); `NotFound` if unknown."""
    row = fetch_one(cur, "get_token", {"id": token_id})
    if row is None:
        raise NotFound(f"token {token_id} not found")
    return row


def _lock(cur: Cursor, token_id: str) -> dict:
    row = fetch_one(cur, "lock_token", {"id": token_id})
    if row is None:
        raise NotFound(f"token {token_id} not found")
    return row


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
