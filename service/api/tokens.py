"""`/api/v1/tokens` (admins): list the tokens (never a secret), create one (its secret shown
once, in the 201, `Cache-Control: no-store`), revoke one (`DELETE`: 204, its API calls and
console sessions answer 401 at once; 409 `last_admin` for the last live, or permanent, admin
token) and rotate one (a new secret, the old one dead at once, `no-store` too), through
`service.domain.tokens`."""

from __future__ import annotations

from typing import Any

import falcon

from service.api.bodies import page_params, read_json
from service.api.resources import Resource
from service.domain import listing, tokens
from service.domain.principals import ADMIN_ONLY
from service.schemas import requests, responses


def _issued(resp: falcon.Response, issued: tokens.IssuedToken, status: int) -> None:
    resp.status = status
    resp.set_header("Cache-Control", "no-store")  # the secret is shown once: kept by no cache
    resp.media = responses.ISSUED_TOKEN.dump({**issued.record, "token": issued.token})


class TokensResource(Resource):
    roles = {"GET": ADMIN_ONLY, "POST": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self.deps.db.transaction() as cur:
            page = listing.list_tokens(cur, **page_params(req))
        resp.media = listing.page_body(responses.TOKEN, page)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req, requests.TokenCreateSchema())
        with self.deps.db.transaction() as cur:
            issued = tokens.create_token(
                cur,
                str(self.deps.new_id()),
                body["name"],
                body["role"],
                body.get("expires_in_s"),
                req.context.principal.name,
                request_id=req.context.request_id,
            )
        resp.location = f"{req.path}/{issued.record['id']}"
        _issued(resp, issued, 201)


class TokenResource(Resource):
    roles = {"DELETE": ADMIN_ONLY}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, token_id: Any) -> None:
        with self.deps.db.transaction() as cur:
            tokens.revoke_token(
                cur, str(token_id), req.context.principal.name, request_id=req.context.request_id
            )
        resp.status = 204


class TokenRotateResource(Resource):
    roles = {"POST": ADMIN_ONLY}

    def on_post(self, req: falcon.Request, resp: falcon.Response, token_id: Any) -> None:
        body = read_json(req, requests.TokenRotateSchema(), optional=True)
        with self.deps.db.transaction() as cur:
            issued = tokens.rotate_token(
                cur,
                str(token_id),
                body.get("expires_in_s"),
                req.context.principal.name,
                request_id=req.context.request_id,
            )
        _issued(resp, issued, 200)
