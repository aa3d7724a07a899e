"""Bearer-token authentication of the REST API. Each resource declares which roles may call
each HTTP method (`roles = {"GET": READ, ...}`, the sets of `service.domain.principals`); the
middleware answers 401 (with `WWW-Authenticate: Bearer`) for a missing or unknown token and
403 for a role that may not make the call, before any body is read."""

from __future__ import annotations

from typing import Any

import falcon

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
