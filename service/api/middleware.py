"""The REST API's middleware and error handlers: a request id on every answer, query
parameters PostgreSQL could not take refused with a 400, and every error (ours, falcon's, a
bug's) answered in the one error shape `{"error": {"code", "message", "details"}}`."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from typing import Any

import falcon

from service.errors import ServiceError, ValidationFailed, error_code

log = logging.getLogger(__name__)

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class RequestIdMiddleware:
    """Every response carries `X-Request-Id`: the caller's (when sane) or a new one."""

    def __init__(self, new_id: Callable[[], uuid.UUID]):
        self.new_id = new_id

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        incoming = req.get_header("X-Request-Id")
        ok = incoming is not None and _REQUEST_ID.fullmatch(incoming)
        req.context.request_id = incoming if ok else self.new_id().hex

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        request_id = getattr(req.context, "request_id", None) or self.new_id().hex
        resp.set_header("X-Request-Id", request_id)


class QueryGuardMiddleware:
    """Query parameters PostgreSQL could not take (a NUL, a lone surrogate) are a 400 naming
    the parameter, for every route, before any resource sees them."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        details = [
            {"field": name, "message": "must not contain NUL characters or lone surrogates"}
            for name, value in req.params.items()
            for text in ([name] + (value if isinstance(value, list) else [value]))
            if not _storable(text)
        ]
        if details:
            raise ValidationFailed("invalid query parameter", details=details[:1])


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def handle_service_error(
    req: falcon.Request, resp: falcon.Response, ex: ServiceError, params: dict
) -> None:
    """Our errors: their status, headers and the JSON error shape."""
    resp.status = ex.status
    resp.media = ex.as_body()
    for name, value in ex.headers.items():
        resp.set_header(name, value)


def handle_http_error(
    req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError, params: dict
) -> None:
    """Falcon's own errors (unknown route, 405, bad header) in our error shape."""
    status = ex.status_code
    resp.status = status
    message = ex.description or ex.title or "error"
    code = error_code(status)
    resp.media = {"error": {"code": code, "message": message, "details": []}}
    for name, value in (ex.headers or {}).items():
        resp.set_header(name, value)


def handle_unexpected(req: falcon.Request, resp: falcon.Response, ex: Exception, params: dict):
    """A bug: log it with the request id, answer 500 in our shape without internals."""
    log.exception("unhandled error (request %s)", getattr(req.context, "request_id", "-"))
    resp.status = 500
    resp.media = {"error": {"code": "internal_error", "message": "internal error", "details": []}}
