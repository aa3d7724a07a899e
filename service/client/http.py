"""A small client of the REST API (`/api/v1`, bearer token) over urllib: what the `etl`
client commands (service/client/) use to talk to the coordinator like any other
client. Error answers raise `ApiError` with the API's error `code`, `message` and `details`;
a connection that cannot be made raises `ApiUnreachable`."""

from __future__ import annotations

import email.utils
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

API_PREFIX = "/api/v1"


class ClientError(Exception):
    """Base class of the API client's errors."""


class ApiUnreachable(ClientError):
    """The API did not answer (refused, unknown host, timeout)."""


class ApiError(ClientError):
    """The API answered with an error status; `code`, `message`, `details` from its body."""

    def __init__(self, status: int, code: str, message: str, details: list[dict] | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = list(details or [])


class ApiClient:
    """The REST API at `base_url` (with or without the `/api/v1` suffix) as `token`.
    `answered_at` is the server's clock at its last answer (its `Date` header, to the
    second), what "running for" durations are measured against: never this machine's clock,
    which may be set differently."""

    def __init__(self, base_url: str, token: str, *, timeout_s: float = 30.0):
        base = base_url.rstrip("/")
        self.base_url = base.removesuffix(API_PREFIX)
        self.token = token
        self.timeout_s = timeout_s
        self.answered_at: datetime | None = None

    # --- transport ---
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        accept: tuple[int, ...] = (),
    ) -> tuple[int, Any]:
        """`method` on `/api/v1{path}`; returns (status, decoded JSON body or None). Statuses
        of 400 and above raise `ApiError` unless listed in `accept`."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        url = f"{self.base_url}{API_PREFIX}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode("utf-8")
        h = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                self.answered_at = _date(resp.headers.get("Date")) or self.answered_at
                return resp.status, _decode(resp.read())
        except urllib.error.HTTPError as exc:
            payload = _decode(exc.read())
            if exc.code in accept:
                return exc.code, payload
            raise _api_error(exc.code, payload) from None
        except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiUnreachable(f"cannot reach the API at {self.base_url}: {reason}") from None

    def pages(
        self, path: str, params: Mapping[str, Any] | None = None, *, limit: int = 50
    ) -> Iterator[dict]:
        """Up to `limit` items of a list endpoint, following `next` cursors."""
        cursor: str | None = None
        left = limit
        while left > 0:
            query = {**(params or {}), "limit": min(left, 500), "before": cursor}
            _, page = self.request("GET", path, params=query)
            yield from page["items"][:left]
            left -= len(page["items"])
            cursor = page["next"]
            if cursor is None:
                return

    # --- pipelines ---
    def list_pipelines(self, *, limit: int = 50) -> list[dict]:
        return list(self.pages("/pipelines", limit=limit))

    def get_pipeline(self, pipeline_id: str) -> dict:
        return self.request("GET", f"/pipelines/{pipeline_id}")[1]

    def set_paused(self, pipeline_id: str, paused: bool) -> dict:
        """Pause (`paused`) or unpause a pipeline; the pipeline as it is then."""
        action = "pause" if paused else "unpause"
        return self.request("POST", f"/pipelines/{pipeline_id}/{action}")[1]

    def delete_pipeline(self, pipeline_id: str) -> None:
        """Delete a pipeline (409 while it has queued or running runs)."""
        self.request("DELETE", f"/pipelines/{pipeline_id}")

    def find_pipeline(self, name_or_id: str) -> dict:
        """The pipeline with this id, or else this name; `ApiError` 404 when neither."""
        if _is_uuid(name_or_id):
            try:
                return self.get_pipeline(name_or_id)
            except ApiError as exc:
                if exc.status != 404:
                    raise
        _, page = self.request("GET", "/pipelines", params={"name": name_or_id, "limit": 1})
        if not page["items"]:
            raise ApiError(404, "not_found", f"no pipeline named or with id {name_or_id!r}")
        return self.get_pipeline(page["items"][0]["id"])

    def pipeline_id_of(self, name_or_id: str) -> str:
        """An id as given (a deleted pipeline's too: its runs stay listed), else the id of
        the live pipeline of this name; `ApiError` 404 when there is none."""
        return name_or_id if _is_uuid(name_or_id) else self.find_pipeline(name_or_id)["id"]

    def create_pipeline(self, name: str, plan: Any) -> dict:
        return self.request("POST", "/pipelines", {"name": name, "plan": plan})[1]

    def update_plan(self, pipeline_id: str, plan: Any, *, revision: int) -> dict:
        """A new revision, only if the pipeline is still at `revision` (If-Match)."""
        headers = {"If-Match": f'"{revision}"'}
        return self.request("PATCH", f"/pipelines/{pipeline_id}", {"plan": plan}, headers=headers)[
            1
        ]

    def get_revision(self, pipeline_id: str, number: int) -> dict:
        return self.request("GET", f"/pipelines/{pipeline_id}/revisions/{number}")[1]

    # --- runs ---
    def trigger(
        self, pipeline_id: str, key: str | None = None, params: dict | None = None
    ) -> tuple[int, dict]:
        """(201 new | 200 existing for the key | 429 skipped, the run)."""
        body: dict[str, Any] = {"trigger_key": key} if key else {}
        if params:
            body["params"] = params
        return self.request("POST", f"/pipelines/{pipeline_id}/runs", body, accept=(429,))

    def get_run(self, run_id: str) -> dict:
        return self.request("GET", f"/runs/{run_id}")[1]

    def list_runs(
        self, *, status: str | None = None, pipeline_id: str | None = None, limit: int = 50
    ) -> list[dict]:
        params = {"status": status, "pipeline_id": pipeline_id}
        return list(self.pages("/runs", params, limit=limit))

    def step_rejects(self, run_id: str, step: str, *, limit: int) -> dict:
        """The first `limit` rejected rows of a step of a run (`StepRejects`)."""
        path = f"/runs/{run_id}/steps/{urllib.parse.quote(step, safe='')}/rejects"
        return self.request("GET", path, params={"limit": limit})[1]

    def cancel_run(self, run_id: str) -> dict:
        return self.request("POST", f"/runs/{run_id}/cancel")[1]

    def resume_run(self, run_id: str) -> tuple[int, dict]:
        """(202 requeued | 429 refused by admission, the run)."""
        return self.request("POST", f"/runs/{run_id}/resume", accept=(429,))

    # --- schedules ---
    def list_schedules(self, pipeline_id: str, *, limit: int = 500) -> list[dict]:
        return list(self.pages(f"/pipelines/{pipeline_id}/schedules", limit=limit))

    def add_schedule(
        self,
        pipeline_id: str,
        *,
        every_minutes: int | None = None,
        daily_at: str | None = None,
        watch: str | None = None,
        catchup: str | None = None,
    ) -> dict:
        given = {
            "every_minutes": every_minutes,
            "daily_at": daily_at,
            "watch": watch,
            "catchup": catchup,
        }
        body = {k: v for k, v in given.items() if v is not None}
        return self.request("POST", f"/pipelines/{pipeline_id}/schedules", body)[1]

    def delete_schedule(self, pipeline_id: str, schedule_id: str) -> None:
        self.request("DELETE", f"/pipelines/{pipeline_id}/schedules/{schedule_id}")

    # --- cursor marks ---
    def list_backfills(self, pipeline_id: str, *, limit: int = 50) -> list[dict]:
        return list(self.pages(f"/pipelines/{pipeline_id}/backfills", limit=limit))

    def list_cursors(self, pipeline_id: str) -> list[dict]:
        return self.request("GET", f"/pipelines/{pipeline_id}/cursors")[1]["cursors"]

    def set_cursor(self, pipeline_id: str, step: str, value: str | int) -> dict:
        path = f"/pipelines/{pipeline_id}/cursors/{urllib.parse.quote(step, safe='')}"
        return self.request("PUT", path, {"value": value})[1]

    def reset_cursors(self, pipeline_id: str, step: str | None = None) -> None:
        path = f"/pipelines/{pipeline_id}/cursors"
        if step is not None:
            path += f"/{urllib.parse.quote(step, safe='')}"
        self.request("DELETE", path)

    # --- tokens ---
    def list_tokens(self, *, limit: int = 500) -> list[dict]:
        return list(self.pages("/tokens", limit=limit))

    def create_token(self, name: str, role: str, expires_in_s: int | None = None) -> dict:
        """A new token; the answer's `token` is its secret, shown this once."""
        body: dict[str, Any] = {"name": name, "role": role}
        if expires_in_s is not None:
            body["expires_in_s"] = expires_in_s
        return self.request("POST", "/tokens", body)[1]

    def revoke_token(self, token_id: str) -> None:
        self.request("DELETE", f"/tokens/{token_id}")

    def rotate_token(self, token_id: str, expires_in_s: int | None = None) -> dict:
        """A new secret for the token (the answer's `token`, shown once)."""
        body = {} if expires_in_s is None else {"expires_in_s": expires_in_s}
        return self.request("POST", f"/tokens/{token_id}/rotate", body)[1]

    def find_token(self, name_or_id: str) -> dict:
        """The token with this id, or else the live token of this name; `ApiError` 404 when
        neither."""
        items = self.list_tokens(limit=100_000)
        by_id = [t for t in items if t["id"] == name_or_id]
        by_name = [t for t in items if t["name"] == name_or_id and t["revoked_at"] is None]
        if by_id or by_name:
            return (by_id or by_name)[0]
        raise ApiError(404, "not_found", f"no live token named or with id {name_or_id!r}")


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _api_error(status: int, payload: Any) -> ApiError:
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        text = payload if isinstance(payload, str) else ""
        return ApiError(status, "http_error", text.strip()[:200] or f"HTTP {status}")
    return ApiError(
        status,
        str(error.get("code") or "error"),
        str(error.get("message") or ""),
        [d for d in error.get("details") or [] if isinstance(d, dict)],
    )


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _date(header: str | None) -> datetime | None:
    """An HTTP `Date` header as an aware datetime; None when absent or unreadable."""
    if not header:
        return None
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)  # "-0000": UTC, source unknown
