"""Bearer-token authentication of the REST API. Each resource declares which roles may call
each HTTP method (`roles = {"GET": READ, ...}`, the sets of `service.domain.principals`); the
middleware answers 401 (with `WWW-Authenticate: Bearer`) for a missing or unknown token and
403 for a role that may not make the call, before any body is read. A token that is presented
but not accepted (unknown, revoked, expired) is a failed authentication: counted per client
address, audited (at most a row a minute) and answered after a delay that grows with the
address's consecutive failures, unless the process's penalty slots are all taken (then at
once: `service.domain.authfailures.Penalties`); a valid token never waits."""

from __future__ import annotations

from typing import Any

import falcon

from service.domain.authfailures import Penalties, record_failure
from service.domain.db import Database
from service.domain.principals import find_principal
from service.errors import Forbidden, Unauthorized


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

    def __init__(self, db: Database, penalties: Penalties):
        self.db = db
        self.penalties = penalties  # the waits of failed authentications

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict
    ) -> None:
        if resource is None or getattr(resource, "public", False):
            return
        token = bearer_token(req.get_header("Authorization"))
        if token is None:
            raise Unauthorized()
        client = req.remote_addr or "unknown"
        principal = find_principal(self.db, token, client_addr=client)
        if principal is None:
            failure = record_failure(self.db, client, "bearer", request_id=req.context.request_id)
            self.penalties.wait(failure.delay_s)
            raise Unauthorized()
        req.context.principal = principal
        allowed = getattr(resource, "roles", {}).get(req.method)
        if allowed is not None and principal.role not in allowed:
            raise Forbidden(f"role {principal.role} may not {req.method} {req.path}")
