"""Console sessions and CSRF tokens.

Signing in with an API token opens a session: the browser gets a random value in an
`HttpOnly`, `SameSite=Strict` cookie, the database keeps only its sha256 hex (with an expiry on
the database clock), bound to the principal and to the API token that signed in: every
request checks that this token is still the principal's, unrevoked and unexpired, so a
revocation, a rotation or an expiry of the token ends its sessions at once (a re-seeded
admin token too). Signing out revokes the row. The CSRF token of
a session is an HMAC of the cookie value: every state-changing form carries it, the server
recomputes it, so nothing more is stored and a page of one session is useless to another."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from service.domain.audit import insert_audit
from service.domain.db import Cursor, Database, execute, fetch_one
from service.domain.principals import Principal, find_principal, hash_token, new_secret

SESSION_COOKIE = "etl_session"
LOGIN_COOKIE = "etl_login"  # pre-session CSRF token of the sign-in form (double submit)
SESSION_TTL_S = 8 * 3600


@dataclass(frozen=True)
class Session:
    """A live console session: who, and the CSRF token its forms must carry."""

    id: str
    principal: Principal
    csrf: str


def csrf_token(cookie: str) -> str:
    """The CSRF token bound to a session (or sign-in) cookie value."""
    return hmac.new(cookie.encode(), b"etl-console-csrf", hashlib.sha256).hexdigest()


def csrf_matches(cookie: str, submitted: str | None) -> bool:
    """True when `submitted` is the CSRF token of `cookie` (constant-time comparison)."""
    return bool(submitted) and hmac.compare_digest(csrf_token(cookie), str(submitted))


def open_session(
    db: Database,
    api_token: str,
    *,
    ttl_s: int = SESSION_TTL_S,
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
    request_id: str | None = None,
    client_addr: str | None = None,
) -> tuple[str, Principal] | None:
    """Sign in with an API token: a new session's cookie value and its principal, or None
    for an unknown (revoked, expired) token. Writes a `console.sign_in` audit row; a match
    clears the failed authentications of `client_addr`."""
    principal = find_principal(db, api_token, client_addr=client_addr)
    if principal is None:
        return None
    cookie = new_secret()
    with db.transaction() as cur:
        execute(cur, "delete_stale_console_sessions")
        params = {
            "id": str(new_id()),
            "token_hash": hash_token(cookie),
            "principal_id": principal.id,
            "api_token_hash": hash_token(api_token),
            "ttl_s": ttl_s,
        }
        execute(cur, "insert_console_session", params)
        _audit(cur, principal.name, "console.sign_in", principal.id, request_id)
    return cookie, principal


def find_session(db: Database, cookie: str | None) -> Session | None:
    """The live session of a cookie value, or None (unknown, revoked or expired). Writes the
    last use of its token at most once a minute, as API calls do."""
    if not cookie:
        return None
    wanted = hash_token(cookie)
    with db.transaction() as cur:
        row = fetch_one(cur, "find_console_session", {"token_hash": wanted})
    if row is None or not hmac.compare_digest(row["token_hash"], wanted):
        return None
    principal = Principal(id=str(row["principal_id"]), name=row["name"], role=row["role"])
    return Session(id=str(row["id"]), principal=principal, csrf=csrf_token(cookie))


def revoke_session(db: Database, cookie: str, principal: str, *, request_id: str | None) -> None:
    """Sign out: the session of `cookie` stops working at once (`console.sign_out` audit)."""
    with db.transaction() as cur:
        row = fetch_one(cur, "revoke_console_session", {"token_hash": hash_token(cookie)})
        if row is not None:
            _audit(cur, principal, "console.sign_out", str(row["principal_id"]), request_id)


def _audit(cur: Cursor, principal: str, action: str, principal_id: str, request_id: str | None):
    insert_audit(
        cur,
        principal=principal,
        action=action,
        entity_type="principal",
        entity_id=principal_id,
        trace_id=request_id,
    )
