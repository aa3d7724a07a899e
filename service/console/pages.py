"""The console's pages (GET) and actions (POST, answered with 303 to a page). Actions call
the same service functions as the REST API (`admit_run`, `cancel_run`, `resume_run`,
`create_schedule`, `delete_schedule`), write the same audit rows and wake the dag-advancer
the same way."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from importlib import resources as package_files
from typing import Any

import falcon

from actors import param_attributes
from actors.preview import DEFAULT_RECORDS, MAX_RECORDS
from dag import RunStatus
from service.console.cursors import NOTICES as CURSOR_NOTICES
from service.console.graph import layout_dag
from service.console.lifecycle import NOTICES as LIFECYCLE_NOTICES
from service.console.rerun import NOTICES as RERUN_NOTICES
from service.console.runview import build_run_page
from service.console.web import PREFIX, ConsoleError, ConsolePage, as_console_errors, read_form
from service.console.web import query_param as _param
from service.domain.audit import audit_change, list_audit_actions
from service.domain.authfailures import record_failure
from service.domain.cursors import list_cursors
from service.domain.db import database_now
from service.domain.deps import wake
from service.domain.listing import (
    MAX_LIMIT,
    list_audit,
    list_revisions,
    list_runs,
    list_schedules,
    list_webhooks,
)
from service.domain.pipelines import get_pipeline, get_revision, list_pipeline_overview
from service.domain.preview import preview_answer
from service.domain.principals import ADMIN_ONLY, OPERATE, READ
from service.domain.runs import (
    Admission,
    AdmissionOutcome,
    Cancellation,
    CancelOutcome,
    admit_run,
    cancel_run,
    resume_run,
)
from service.domain.schedules import create_schedule, delete_schedule
from service.domain.sessions import (
    LOGIN_COOKIE,
    SESSION_COOKIE,
    csrf_matches,
    csrf_token,
    new_secret,
    open_session,
    revoke_session,
)
from service.domain.webhooks import list_recent_deliveries
from service.errors import ServiceError
from service.schemas import requests
from service.schemas.requests import MAX_BODY_BYTES
from service.tracing import trigger_span

PAGE_SIZE = 50
STATIC_TYPES = {"console.css": "text/css; charset=utf-8", "console.js": "text/javascript"}
# Notices a redirect may name (`?notice=`): fixed texts, so nothing users wrote is reflected.
NOTICES = {
    AdmissionOutcome.CREATED: "Run triggered.",
    AdmissionOutcome.EXISTING: "A run with this trigger key exists already; here it is.",
    AdmissionOutcome.SKIPPED: "Trigger skipped: see the reason below.",
    CancelOutcome.CANCELED: "Run canceled.",
    CancelOutcome.CANCEL_REQUESTED: "Cancel requested: the steps stop at their next batch"
    " boundary.",
    AdmissionOutcome.REQUEUED: "Run resumed: it is back in its pipeline's queue.",
    AdmissionOutcome.REFUSED: "Resume refused by the queue limits; the run stays failed.",
    "schedule_added": "Schedule added.",
    "schedule_deleted": "Schedule deleted.",
    "signed_out": "Signed out.",
    **LIFECYCLE_NOTICES,
    **CURSOR_NOTICES,
    **RERUN_NOTICES,
}


def _set_cookie(req: falcon.Request, resp: falcon.Response, name: str, value: str, max_age: int):
    # Secure only over HTTPS: browsers drop Secure cookies set over plain http.
    resp.set_cookie(
        name,
        value,
        max_age=max_age,
        path=PREFIX,
        secure=req.scheme == "https",
        http_only=True,
        same_site="Strict",
    )


def _notice(req: falcon.Request) -> str | None:
    return NOTICES.get(req.get_param("notice") or "")


class StaticFile(ConsolePage):
    """The console's CSS and JS (the CSP allows no inline script or style)."""

    anonymous = True

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        if name not in STATIC_TYPES:
            raise ConsoleError(404, "no such file")
        resp.content_type = STATIC_TYPES[name]
        resp.text = package_files.files("service.console").joinpath("static", name).read_text()
        resp.set_header("Cache-Control", "no-cache")


class LoginPage(ConsolePage):
    """Sign-in form taking an API token (POST only: a token never travels in a URL)."""

    anonymous = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.context.console_session is not None:
            raise falcon.HTTPSeeOther(f"{PREFIX}/")
        self._form(req, resp, error=None, status=200)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = read_form(req)
        if not csrf_matches(req.cookies.get(LOGIN_COOKIE, ""), form.get("csrf")):
            raise ConsoleError(403, "the sign-in form expired; reload the page")
        token = form.get("token", "").strip()
        opened = (
            open_session(
                self.deps.db,
                token,
                ttl_s=self.console.settings.session_ttl_s,
                new_id=self.deps.new_id,
                request_id=req.context.request_id,
                client_addr=req.remote_addr or "unknown",
            )
            if token
            else None
        )
        if opened is None:
            if token:  # a failed sign-in, counted, audited and slowed like a bad bearer token
                failure = record_failure(
                    self.deps.db,
                    req.remote_addr or "unknown",
                    "sign_in",
                    request_id=req.context.request_id,
                )
                self.deps.penalties.wait(failure.delay_s)
            self._form(req, resp, error="Unknown token.", status=401)
            return
        cookie, _ = opened
        _set_cookie(req, resp, SESSION_COOKIE, cookie, self.console.settings.session_ttl_s)
        resp.unset_cookie(LOGIN_COOKIE, same_site="Strict", path=PREFIX)
        raise falcon.HTTPSeeOther(f"{PREFIX}/")

    def _form(self, req: falcon.Request, resp: falcon.Response, *, error: str | None, status: int):
        secret = new_secret()
        _set_cookie(req, resp, LOGIN_COOKIE, secret, 3600)
        resp.status = status
        self.console.render(
            req, resp, "login.html", login_csrf=csrf_token(secret), error=error, notice=_notice(req)
        )


class LogoutAction(ConsolePage):
    roles = {"POST": READ}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        revoke_session(
            self.deps.db,
            req.cookies[SESSION_COOKIE],
            req.context.principal.name,
            request_id=req.context.request_id,
        )
        resp.unset_cookie(SESSION_COOKIE, same_site="Strict", path=PREFIX)
        raise falcon.HTTPSeeOther(f"{PREFIX}/login?notice=signed_out")


class PipelinesPage(ConsolePage):
    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        after, before = _param(req, "after"), _param(req, "before")
        with self.deps.db.transaction() as cur:
            page = list_pipeline_overview(cur, limit=PAGE_SIZE, after=after, before=before)
        self.console.render(
            req,
            resp,
            "pipelines.html",
            pipelines=page.rows,
            next_after=page.after,
            prev_before=page.before,
            notice=_notice(req),
        )


class PipelinePage(ConsolePage):
    """DAG of the current revision, revisions (and a diff of two), schedules, cursor marks,
    runs; for admins also the webhooks and their latest deliveries."""

    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        pid = str(pipeline_id)
        admin = req.context.console_session.principal.role in ADMIN_ONLY
        hooks: list[dict] = []
        deliveries: list[dict] = []
        with as_console_errors(), self.deps.db.transaction() as cur:
            pipeline = get_pipeline(cur, pid)
            newest, _ = list_revisions(cur, pipeline_id=pid, limit=MAX_LIMIT)
            schedules, _ = list_schedules(cur, pipeline_id=pid, limit=MAX_LIMIT)
            cursors = list_cursors(cur, pid)
            runs, _ = list_runs(cur, status=None, pipeline_id=pid, limit=PAGE_SIZE, before=None)
            b = _revision_param(req, "b", pipeline["revision"]) or pipeline["revision"]
            a = _revision_param(req, "a", pipeline["revision"]) or max(b - 1, 1)
            plans = {n: get_revision(cur, pid, n)["plan"] for n in {a, b}}
            now = database_now(cur)
            if admin:  # a webhook's URL may carry a receiver's credentials
                hooks, _ = list_webhooks(cur, pipeline_id=pid, limit=MAX_LIMIT)
                deliveries = list_recent_deliveries(cur, pid)
        revisions = newest[::-1]  # oldest first, as the page lists them
        diff = _plan_diff(plans[a], plans[b], a, b) if a != b else []
        steps = _plan_steps(pipeline["plan"])
        self.console.render(
            req,
            resp,
            "pipeline.html",
            pipeline=pipeline,
            dag=layout_dag(steps),
            steps={str(s.get("name")): s for s in steps},
            revisions=revisions,
            schedules=schedules,
            cursors=cursors,
            webhooks=hooks,
            deliveries=deliveries,
            runs=[r for r in runs if r["status"] != RunStatus.SKIPPED],
            skipped=[r for r in runs if r["status"] == RunStatus.SKIPPED],
            plan_json=json.dumps(pipeline["plan"], indent=2),
            max_preview_records=MAX_RECORDS,
            a=a,
            b=b,
            diff=diff,
            now=now,
            notice=_notice(req),
        )


class PreviewAction(ConsolePage):
    """The preview panel's answer: the pipeline's current plan, or an edited one pasted in
    the form, previewed on the first records (`service.domain.preview.preview_answer`, as
    the API does); an audit row is all it writes. Roles as creating a pipeline."""

    roles = {"POST": ADMIN_ONLY}
    max_form_bytes = MAX_BODY_BYTES  # a pasted plan may be as large as the API takes

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        form, pid = req.context.form, str(pipeline_id)
        with as_console_errors(), self.deps.db.transaction() as cur:
            pipeline = get_pipeline(cur, pid)
        text = form.get("plan", "").strip()
        page: dict[str, Any] = {"pipeline": pipeline, "records": DEFAULT_RECORDS, "errors": []}
        page.update(preview=None, dag=None, by_name={})
        edited = bool(text)
        try:  # the API's own loaders: one validator for a JSON body and for this form
            plan = requests.decode_json(text, "plan text") if text else pipeline["plan"]
            edited = edited and plan != pipeline["plan"]
            records = requests.form_integer(form.get("records") or str(DEFAULT_RECORDS))
            fields = {"plan": plan, "records": records}
            loaded = requests.load_fields(fields, requests.PreviewRequestSchema(), "form")
            page["records"] = loaded["records"]
            page["preview"] = preview_answer(self.deps.config, loaded["plan"], loaded["records"])
            page["dag"] = layout_dag(_plan_steps(loaded["plan"]))
            page["by_name"] = {s["name"]: {**s, "progress": None} for s in page["preview"]["steps"]}
        except ServiceError as exc:  # 400: the form shows what to change
            resp.status = falcon.HTTP_400
            page["errors"] = exc.details or [{"field": "plan", "message": exc.message}]
        page["source"] = (
            "an edited plan (not saved)" if edited else f"revision {pipeline['revision']}"
        )
        with self.deps.db.transaction() as cur:
            audit_change(
                cur,
                req.context.principal.name,
                "pipeline.preview",
                f"pipeline:{pid}",
                req.context.request_id,
                records=page["records"],
                edited=edited,
                ok=_preview_ok(page),
            )
        self.console.render(req, resp, "preview.html", **page)


def _plan_steps(plan: Any) -> list[dict[str, Any]]:
    """The step objects of a plan (whatever else it holds is not drawn)."""
    steps = plan.get("steps", []) if isinstance(plan, dict) else []
    return [s for s in steps if isinstance(s, dict)]


def _preview_ok(page: dict[str, Any]) -> bool:
    return page["preview"] is not None and bool(page["preview"]["ok"])


def _revision_param(req: falcon.Request, name: str, current: int) -> int | None:
    """Revision number `name` of the query if it is one of the pipeline's (1..current)."""
    number = requests.form_integer(req.get_param(name) or "")
    return number if isinstance(number, int) and 1 <= number <= current else None


def _plan_diff(old: Any, new: Any, a: int, b: int) -> list[tuple[str, str]]:
    """A unified diff of two plans as pretty JSON: (kind, line) with kind add|del|hunk|same."""
    left = json.dumps(old, indent=2, sort_keys=True).splitlines()
    right = json.dumps(new, indent=2, sort_keys=True).splitlines()
    out = []
    for line in difflib.unified_diff(left, right, f"revision {a}", f"revision {b}", lineterm=""):
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        if line.startswith(("+++", "---")):
            kind = "file"
        out.append((kind, line))
    return out


class TriggerAction(ConsolePage):
    roles = {"POST": OPERATE}

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        key = req.context.form.get("trigger_key", "").strip()
        with as_console_errors():
            if key:
                requests.load_fields({"trigger_key": key}, requests.RunTriggerSchema(), "form")
            with (
                trigger_span(
                    self.deps.tracer, "trigger_run", attributes={"etl.face": "console"}
                ) as trigger,
                self.deps.db.transaction() as cur,
            ):
                admission = admit_run(
                    cur,
                    str(pipeline_id),
                    key or f"manual:{self.deps.new_id()}",
                    req.context.principal.name,
                    new_id=self.deps.new_id,
                    request_id=req.context.request_id,
                    trace=trigger.run_trace,
                )
                trigger.span.set_attributes(param_attributes(admission.run.get("params")))
        if admission.needs_wake:
            wake(self.deps, admission.run)
        raise falcon.HTTPSeeOther(f"{PREFIX}/runs/{admission.run['id']}?notice={admission.outcome}")


class ScheduleAddAction(ConsolePage):
    roles = {"POST": ADMIN_ONLY}

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        form = req.context.form
        if form.get("kind") == "daily":
            body: dict[str, Any] = {"daily_at": form.get("daily_at", "").strip()}
        elif form.get("kind") == "watch":
            body = {"watch": form.get("watch", "").strip()}
        else:
            raw = form.get("every_minutes", "").strip()
            body = {"every_minutes": requests.form_integer(raw)}
        with as_console_errors():
            loaded = requests.load_fields(body, requests.ScheduleCreateSchema(), "form")
            with self.deps.db.transaction() as cur:
                create_schedule(
                    cur,
                    str(pipeline_id),
                    loaded,
                    req.context.principal.name,
                    schedule_id=str(self.deps.new_id()),
                    now=self.deps.now(),
                    request_id=req.context.request_id,
                )
        raise falcon.HTTPSeeOther(f"{PREFIX}/pipelines/{pipeline_id}?notice=schedule_added")


class ScheduleDeleteAction(ConsolePage):
    roles = {"POST": ADMIN_ONLY}

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any, schedule_id: Any
    ) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            delete_schedule(
                cur,
                str(pipeline_id),
                str(schedule_id),
                req.context.principal.name,
                request_id=req.context.request_id,
            )
        raise falcon.HTTPSeeOther(f"{PREFIX}/pipelines/{pipeline_id}?notice=schedule_deleted")


class RunPage(ConsolePage):
    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response, run_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            page = build_run_page(cur, self.console.settings, str(run_id))
        refresh = self.console.settings.refresh_ms if page["active"] else 0
        resp.set_header("X-Trace-Id", page["run"]["trace_id"])
        page["refresh_ms"] = refresh
        self.console.render(req, resp, "run.html", notice=_notice(req), **page)


class _RunAction(ConsolePage):
    """The Cancel and Resume buttons: one path, only `act` differs (as in the API)."""

    roles = {"POST": OPERATE}
    act: Callable[..., Admission | Cancellation]

    def on_post(self, req: falcon.Request, resp: falcon.Response, run_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            change = self.act(
                cur, str(run_id), req.context.principal.name, request_id=req.context.request_id
            )
        if change.needs_wake:
            wake(self.deps, change.run)
        raise falcon.HTTPSeeOther(f"{PREFIX}/runs/{run_id}?notice={change.outcome}")


class CancelAction(_RunAction):
    act = staticmethod(cancel_run)


class ResumeAction(_RunAction):
    act = staticmethod(resume_run)


class AuditPage(ConsolePage):
    """The audit trail (admins), filterable by action, principal and entity id."""

    roles = {"GET": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        params = {k: _param(req, k) for k in ("action", "principal", "entity_id")}
        with as_console_errors(), self.deps.db.transaction() as cur:
            page, next_id = list_audit(
                cur, filters=params, limit=PAGE_SIZE, before=_param(req, "before")
            )
            actions = list_audit_actions(cur)
        for r in page:
            r["details_json"] = json.dumps(r["details"], sort_keys=True, default=str)
        self.console.render(
            req, resp, "audit.html", rows=page, next_id=next_id, actions=actions, f=params
        )
