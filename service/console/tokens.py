"""The console's Tokens page (admins, `/ui/tokens`): every token with its role, times and
state; a form making a new one and a Rotate and a Revoke button per live token. A new or
rotated secret is shown once, on the page that answers the POST (never in a URL or a
redirect; `/ui` answers are `Cache-Control: no-store`). The same domain functions as the REST
API (`service.domain.tokens`), the same audit rows; revoking the token you signed in with
ends your own session."""

from __future__ import annotations

from typing import Any

import falcon

from service.console.web import PREFIX, ConsoleError, ConsolePage, as_console_errors
from service.domain import tokens
from service.domain.listing import MAX_LIMIT, list_tokens
from service.domain.principals import ADMIN_ONLY, ROLES
from service.schemas import requests

# The lifetimes the form offers (label -> seconds; None: never expires).
LIFETIMES: dict[str, int | None] = {
    "never": None,
    "1 day": 86400,
    "7 days": 7 * 86400,
    "30 days": 30 * 86400,
    "90 days": 90 * 86400,
    "365 days": 365 * 86400,
}
NOTICES = {"token_revoked": "Token revoked: its API calls and console sessions end at once."}


def _lifetime(form: dict[str, str]) -> int | None:
    label = form.get("expires", "never")
    if label not in LIFETIMES:
        raise ConsoleError(400, f"expires: choose one of {', '.join(LIFETIMES)}")
    return LIFETIMES[label]


class TokensPage(ConsolePage):
    """`GET`: the list and the form; `POST`: make a token and show its secret once."""

    roles = {"GET": ADMIN_ONLY, "POST": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _render(self, req, resp, issued=None)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = req.context.form
        fields = {"name": form.get("name", "").strip(), "role": form.get("role", "")}
        lifetime = _lifetime(form)
        if lifetime is not None:
            fields["expires_in_s"] = lifetime
        with as_console_errors():
            loaded = requests.load_fields(fields, requests.TokenCreateSchema(), "form")
            with self.deps.db.transaction() as cur:
                issued = tokens.create_token(
                    cur,
                    str(self.deps.new_id()),
                    loaded["name"],
                    loaded["role"],
                    loaded.get("expires_in_s"),
                    req.context.principal.name,
                    request_id=req.context.request_id,
                )
        resp.status = falcon.HTTP_201
        _render(self, req, resp, issued=issued, what="created")


def _render(page: ConsolePage, req: falcon.Request, resp: falcon.Response, **ctx: Any) -> None:
    """The Tokens page, with a secret just issued (`issued`, `what`) when there is one."""
    with page.deps.db.transaction() as cur:
        rows, _ = list_tokens(cur, limit=MAX_LIMIT)
    page.console.render(
        req,
        resp,
        "tokens.html",
        tokens=rows,
        roles=ROLES,
        lifetimes=list(LIFETIMES),
        notice=NOTICES.get(req.get_param("notice") or ""),
        **ctx,
    )


class TokenRotateAction(ConsolePage):
    """`POST .../rotate`: a new secret for the token, shown once."""

    roles = {"POST": ADMIN_ONLY}

    def on_post(self, req: falcon.Request, resp: falcon.Response, token_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            issued = tokens.rotate_token(
                cur,
                str(token_id),
                None,
                req.context.principal.name,
                request_id=req.context.request_id,
            )
        _render(self, req, resp, issued=issued, what="rotated")


class TokenRevokeAction(ConsolePage):
    roles = {"POST": ADMIN_ONLY}

    def on_post(self, req: falcon.Request, resp: falcon.Response, token_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            tokens.revoke_token(
                cur, str(token_id), req.context.principal.name, request_id=req.context.request_id
            )
        raise falcon.HTTPSeeOther(f"{PREFIX}/tokens?notice=token_revoked")
