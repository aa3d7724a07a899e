"""Answers of the HTTP endpoints the platform posts to (OpenLineage, OTLP), read within
bounds: at most `MAX_HTTP_ANSWER_BYTES` of a body, within `MAX_HTTP_ANSWER_S` after its headers.

Both clients use `requests`, which reads a whole answer into memory: an endpoint answering
1 GiB took the process past 2 GiB. `BoundedAnswers` is a `requests` transport adapter that
streams the answer, keeps its first `max_bytes` as the response's content (all the clients
read: a status, at most a small body) and closes the connection on the rest, so a redirect
or a retry reads no more. The per-read timeout stays the caller's (`timeout=`); the body as
a whole gets `max_s` more. The webhook notifier bounds its own answers the same way
(service/notifier.py, with `MAX_HTTP_ANSWER_BYTES`)."""

from __future__ import annotations

import time
from typing import Any

import requests
from requests.adapters import HTTPAdapter

MAX_HTTP_ANSWER_BYTES = 64 * 1024  # of an answer's body kept; the rest is never read
MAX_HTTP_ANSWER_S = 10.0  # to read that much, after the headers came
_READ_BYTES = 16 * 1024


class BoundedAnswers(HTTPAdapter):
    """A `requests` adapter reading at most `max_bytes` of any answer, for at most `max_s`
    after its headers (extra `HTTPAdapter` arguments, e.g. `max_retries`, pass through)."""

    def __init__(
        self,
        *,
        max_bytes: int = MAX_HTTP_ANSWER_BYTES,
        max_s: float = MAX_HTTP_ANSWER_S,
        **adapter: Any,
    ) -> None:
        self.max_bytes, self.max_s = max_bytes, max_s
        super().__init__(**adapter)

    def send(self, request: Any, stream: bool = False, **kwargs: Any) -> requests.Response:
        response = super().send(request, stream=True, **kwargs)
        body, complete = read_bounded(response.raw, self.max_bytes, time.monotonic() + self.max_s)
        if not complete:
            response.raw.close()  # the connection: what is left is never read
        response.raw.release_conn()
        response._content = body  # what `.content`, `.text` and `.json()` answer
        response._content_consumed = True
        return response


def read_bounded(raw: Any, max_bytes: int, deadline: float) -> tuple[bytes, bool]:
    """At most `max_bytes` of `raw` (a urllib3 response, decoded), read until `deadline`
    (monotonic); whether that was all of it."""
    chunks: list[bytes] = []
    size = 0
    while size <= max_bytes and time.monotonic() < deadline:
        # read1: what one read of the socket brings (read would wait for all `amt` bytes)
        chunk = raw.read1(min(_READ_BYTES, max_bytes + 1 - size), decode_content=True)
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:max_bytes], False


def bounded_session(**bounds: Any) -> requests.Session:
    """A `requests.Session` whose every answer is read by `BoundedAnswers(**bounds)`."""
    session = requests.Session()
    adapter = BoundedAnswers(**bounds)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
