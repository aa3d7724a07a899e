"""The console's plumbing: settings, the template environment, the session/role/CSRF
middleware, security headers and the HTML error page."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import falcon
from jinja2 import Environment, PackageLoader, StrictUndefined

from dag.durations import duration_text
from service.domain.principals import ADMIN_ONLY, OPERATE
from service.domain.sessions import SESSION_COOKIE, SESSION_TTL_S, csrf_matches, find_session
from service.errors import ServiceError

if TYPE_CHECKING:
    from service.config import Config
    from service.domain.deps import Deps

PREFIX = "/ui"
MAX_FORM_BYTES = 16 * 1024
# No inline script or style anywhere: CSS and JS come from /ui/static only.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@dataclass(frozen=True)
class ConsoleSettings:
    """What the console reads besides the database: where reject and export files are,
    the data directory (progress of file ingest), the sandbox (export row counts)."""

    data_dir: Path = Path("fixtures")
    export_dir: Path = Path("var/exports")
    reject_dir: Path = Path("var/rejects")
    sandbox_url: str | None = None
    session_ttl_s: int = SESSION_TTL_S
    refresh_ms: int = 1000  # the run page polls at most once a second while the run is active
    trace_url: str | None = None  # `{trace_id}` in it: where a run's trace id links to

    def trace_link(self, trace_id: str | None) -> str | None:
        """The URL of a run's trace, when a template is configured."""
        if not self.trace_url or not trace_id:
            return None
        return self.trace_url.replace("{trace_id}", urllib.parse.quote(trace_id, safe=""))

    @classmethod
    def from_config(cls, cfg: Config) -> ConsoleSettings:
        """The settings of the coordinator's configuration."""
        return cls(
            data_dir=cfg.data_dir,
            export_dir=cfg.export_dir,
            reject_dir=cfg.reject_dir,
            sandbox_url=cfg.sandbox_url,
            trace_url=cfg.trace_url,
        )


def query_param(req: falcon.Request, name: str) -> str | None:
    """A query parameter with white space trimmed; None when absent or empty."""
    value = (req.get_param(name) or "").strip()
    return value or None


class ConsoleError(Exception):
    """An error the console answers with an HTML page (status + message)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@contextmanager
def as_console_errors() -> Iterator[None]:
    """Turn a service error (404, 409, 400 ...) into the console's HTML error page."""
    try:
        yield
    except ServiceError as exc:
        details = "; ".join(f"{d['field']}: {d['message']}" for d in exc.details)
        raise ConsoleError(exc.status, exc.message + (f" ({details})" if details else "")) from exc


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "\u2014"


def _json_text(value: Any) -> str:
    """JSON as plain text (autoescaping then makes it safe); unlike `tojson`, `<` stays
    readable instead of becoming `\\u003c`."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _num(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else ("\u2014" if value is None else str(value))


class Console:
    """The console's shared state: dependencies, settings and the template environment
    (autoescaping on for every template: whatever users wrote renders as text)."""

    def __init__(self, deps: Deps, settings: ConsoleSettings):
        self.deps = deps
        self.settings = settings
        self.env = Environment(
            loader=PackageLoader("service.console", "templates"),
            autoescape=True,
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["when"] = _when
        self.env.filters["num"] = _num
        self.env.filters["json_text"] = _json_text
        self.env.globals["duration"] = duration_text

    def render(self, req: falcon.Request, resp: falcon.Response, template: str, **ctx: Any) -> None:
        """Answer with `template` rendered for the signed-in caller (if any)."""
        session = getattr(req.context, "console_session", None)
        role = session.principal.role if session else None
        resp.content_type = "text/html; charset=utf-8"
        defaults = {
            "session": session,
            "csrf": session.csrf if session else "",
            "can_operate": role in OPERATE,
            "is_admin": role in ADMIN_ONLY,
            "refresh_ms": 0,
            "notice": None,
        }
        resp.text = self.env.get_template(template).render({**defaults, **ctx})


class ConsolePage:
    """Base of the console's resources. They are `public` to the bearer-token middleware:
    `ConsoleMiddleware` authenticates them by session cookie instead. `roles` maps each HTTP
    method to the roles allowed (as in the REST API); `anonymous` pages need no session."""

    public = True
    anonymous = False
    roles: ClassVar[dict[str, frozenset[str]]] = {}
    max_form_bytes: ClassVar[int] = MAX_FORM_BYTES

    def __init__(self, console: Console):
        self.console = console
        self.deps = console.deps


def read_form(req: falcon.Request, max_bytes: int = MAX_FORM_BYTES) -> dict[str, str]:
    """An `application/x-www-form-urlencoded` body (first value of each field); 415 for any
    other type, 413 past `max_bytes`."""
    media = (req.content_type or "").split(";")[0].strip().lower()
    if media != falcon.MEDIA_URLENCODED:
        raise ConsoleError(415, "forms must be sent as application/x-www-form-urlencoded")
    raw = req.bounded_stream.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise ConsoleError(413, f"the form exceeds {max_bytes} bytes")
    fields = urllib.parse.parse_qs(raw.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {k: v[0] for k, v in fields.items()}


class ConsoleMiddleware:
    """Session, role and CSRF checks for console resources, security headers for /ui.

    No session: a GET is sent to the sign-in page, anything else gets 401. A role the REST
    API would refuse gets 403. A POST must carry the session's CSRF token (`csrf` field),
    else 403; its form is parsed here, once, into `req.context.form`."""

    def __init__(self, console: Console):
        self.console = console

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict
    ) -> None:
        if not isinstance(resource, ConsolePage):
            return
        cookie = req.cookies.get(SESSION_COOKIE)
        session = find_session(self.console.deps.db, cookie)
        req.context.console_session = session
        if resource.anonymous:
            return
        if session is None or cookie is None:
            if req.method in ("GET", "HEAD"):
                raise falcon.HTTPSeeOther(f"{PREFIX}/login")
            raise ConsoleError(401, "sign in first")
        req.context.principal = session.principal
        allowed = resource.roles.get(req.method)
        if allowed is not None and session.principal.role not in allowed:
            raise ConsoleError(403, f"role {session.principal.role} may not do this")
        if req.method == "POST":
            req.context.form = read_form(req, resource.max_form_bytes)
            if not csrf_matches(cookie, req.context.form.get("csrf")):
                raise ConsoleError(
                    403, "the form's CSRF token is missing or wrong; reload the page"
                )

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        if req.path == PREFIX or req.path.startswith(PREFIX + "/"):
            for name, value in SECURITY_HEADERS.items():
                resp.set_header(name, value)
            if not req.path.startswith(f"{PREFIX}/static/"):
                resp.set_header("Cache-Control", "no-store")


def console_error_handler(console: Console):
    """The falcon error handler rendering `ConsoleError` as the HTML error page."""

    def handle(req: falcon.Request, resp: falcon.Response, ex: ConsoleError, params: dict) -> None:
        resp.status = ex.status
        console.render(req, resp, "error.html", status=ex.status, message=ex.message)

    return handle
