"""Errors of the coordinator side. Each carries the HTTP status and machine-readable code the
API answers with (`{"error": {"code", "message", "details": [{"field", "message"}]}}`);
callers outside HTTP (CLI, scheduler) use the same classes and ignore the status."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# The HTTP statuses the API answers errors with, written once: the code of the error body
# (of the classes below, and of falcon's own errors) and what the status means (the
# OpenAPI document's response descriptions).
HTTP_ERRORS: dict[int, tuple[str, str]] = {
    400: ("bad_request", "invalid request (field paths in details)"),
    401: ("unauthorized", "no or unknown bearer token"),
    403: ("forbidden", "the role may not make this call"),
    404: ("not_found", "no such resource"),
    405: ("method_not_allowed", "the path takes no such method"),
    409: ("conflict", "conflicts with the current state"),
    411: ("length_required", "a chunked body this server cannot read"),
    412: ("precondition_failed", "If-Match names another revision"),
    413: ("payload_too_large", "body over 1 MiB"),
    415: ("unsupported_media_type", "body not application/json"),
    429: ("too_many_requests", "refused by the admission limits"),
    503: ("database_unavailable", "the database is unavailable"),
}


def error_code(status: int) -> str:
    """The error body's code of `status` (`http_error` for one the API does not answer)."""
    return HTTP_ERRORS.get(status, ("http_error", ""))[0]


class ServiceError(Exception):
    """Base class of every error raised by `service`."""

    status: int = 500
    code: str = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        details: Iterable[Mapping[str, str]] = (),
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.details = [{"field": d["field"], "message": d["message"]} for d in details]
        if code is not None:
            self.code = code
        self.headers = dict(headers or {})

    def as_body(self) -> dict:
        """The JSON error body."""
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class ValidationFailed(ServiceError):
    """The request body or a parameter failed validation; `details` name the fields."""

    status = 400
    code = "validation_error"


class InvalidPlan(ValidationFailed):
    """The plan failed `dag` validation; `details` carry `plan.`-prefixed field paths."""

    code = "invalid_plan"


class MalformedJson(ServiceError):
    """The request body is not valid JSON (or not UTF-8)."""

    status = 400
    code = "malformed_json"


class Unauthorized(ServiceError):
    """No bearer token, or one that matches no principal."""

    status = 401
    code = error_code(status)

    def __init__(self, message: str = "a valid bearer token is required"):
        super().__init__(message, headers={"WWW-Authenticate": 'Bearer realm="etl"'})


class Forbidden(ServiceError):
    """The principal's role may not make this call."""

    status = 403
    code = error_code(status)


class NotFound(ServiceError):
    """The addressed pipeline, revision, run or schedule does not exist."""

    status = 404
    code = error_code(status)


class Conflict(ServiceError):
    """The call clashes with the current state (duplicate name, run already finished)."""

    status = 409
    code = error_code(status)


class LengthRequired(ServiceError):
    """A body of unknown length (chunked) that this server cannot read to its end."""

    status = 411
    code = error_code(status)


class PreconditionFailed(ServiceError):
    """`If-Match` named a revision that is not the current one."""

    status = 412
    code = error_code(status)


class PayloadTooLarge(ServiceError):
    """The request body is larger than the API accepts."""

    status = 413
    code = error_code(status)


class UnsupportedMediaType(ServiceError):
    """A request body that is not `application/json`."""

    status = 415
    code = error_code(status)


class DatabaseUnavailable(ServiceError):
    """PostgreSQL cannot be reached or dropped the connection."""

    status = 503
    code = error_code(status)
