"""What a request carries: its JSON body, read bounded (413, 411, 415, 400 in that order)
and loaded through a request schema, and the `limit`/`before` of a list request."""

from __future__ import annotations

from typing import Any

import falcon
from marshmallow import Schema

from service.domain import listing
from service.errors import LengthRequired, PayloadTooLarge
from service.schemas.requests import MAX_BODY_BYTES, load_body


def read_json(req: falcon.Request, schema: Schema, *, optional: bool = False) -> dict[str, Any]:
    """The request body loaded through `schema` (see `schemas.requests.load_body`). Bodies
    over `MAX_BODY_BYTES` -> 413, judged by Content-Length first and by a capped read too."""
    if (req.content_length or 0) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"the body exceeds {MAX_BODY_BYTES} bytes")
    raw = read_body(req, MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"the body exceeds {MAX_BODY_BYTES} bytes")
    return load_body(raw, req.content_type, schema, optional=optional)


def read_body(req: falcon.Request, max_bytes: int) -> bytes:
    """At most `max_bytes` of the body. A body without Content-Length (`Transfer-Encoding:
    chunked`) is read from the server's input, which ends it (gunicorn decodes the chunks);
    a server that cannot end it gets 411 rather than a body silently taken as empty."""
    if req.content_length is not None or req.get_header("Transfer-Encoding") is None:
        return req.bounded_stream.read(max_bytes)
    if not req.env.get("wsgi.input_terminated"):
        raise LengthRequired(
            "send a Content-Length header (this server cannot read chunked bodies)"
        )
    parts: list[bytes] = []
    size = 0
    while size < max_bytes:
        part = req.stream.read(max_bytes - size)
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)


def page_params(req: falcon.Request) -> dict[str, Any]:
    """`limit` and `before` of a list request (see `service.domain.listing`)."""
    return {"limit": listing.parse_limit(req.get_param("limit")), "before": req.get_param("before")}
