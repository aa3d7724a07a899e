"""A pipeline's backfills in the console (docs/console.md): the list with each one's
progress and a form to start one (`GET`/`POST /ui/pipelines/{id}/backfills`), one backfill's
values with their runs and statuses, live while it runs (`GET /ui/backfills/{id}`), and its
Cancel (`POST /ui/backfills/{id}/cancel`). The same domain functions as the REST API
(`create_backfill`, `admit_waiting`, `cancel_backfill`), the same audit rows and wake-ups;
starting and canceling take the roles the API asks (admin, operator)."""

from __future__ import annotations

from typing import Any

import falcon

from dag import declared_params
from service.console.web import PREFIX, ConsolePage, as_console_errors
from service.domain.backfills import (
    BackfillStatus,
    admit_waiting,
    cancel_backfill,
    create_backfill,
    get_backfill_view,
)
from service.domain.deps import wake
from service.domain.listing import list_backfills
from service.domain.pipelines import get_pipeline
from service.domain.principals import OPERATE, READ
from service.schemas import requests
from service.schemas.backfills import BackfillCreateSchema

LISTED = 50
RANGE_TYPES = ("int", "date")  # the parameter types a backfill steps through
# The notices these pages and actions redirect with (`?notice=`): fixed texts.
NOTICES = {
    "backfill_started": "Backfill started: its values are admitted in order as the pipeline"
    " has room.",
    "backfill_canceled": "Backfill canceled: pending values dropped, its runs canceled.",
}


def _notice(req: falcon.Request) -> str | None:
    return NOTICES.get(req.get_param("notice") or "")


def _progress(backfill: dict[str, Any]) -> dict[str, Any]:
    """A backfill with `done` (values whose run ended) for its progress bar."""
    return {**backfill, "done": backfill["succeeded"] + backfill["failed"]}


class BackfillsPage(ConsolePage):
    """`GET`: the pipeline's backfills, newest first, with progress, and (operators) the
    form to start one over an `int` or `date` parameter; `POST`: start it."""

    roles = {"GET": READ, "POST": OPERATE}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            pipeline = get_pipeline(cur, str(pipeline_id))
            page, _ = list_backfills(cur, pipeline_id=str(pipeline_id), limit=LISTED)
        listed = [_progress(b) for b in page]
        running = any(b["status"] == BackfillStatus.RUNNING for b in listed)
        params = {n: t for n, t in declared_params(pipeline["plan"]).items() if t in RANGE_TYPES}
        self.console.render(
            req,
            resp,
            "backfills.html",
            pipeline=pipeline,
            backfills=listed,
            range_params=params,
            refresh_ms=self.console.settings.refresh_ms if running else 0,
            notice=_notice(req),
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        form, pid = req.context.form, str(pipeline_id)
        with as_console_errors():
            with self.deps.db.transaction() as cur:
                pipeline = get_pipeline(cur, pid)
            name = form.get("param", "").strip()
            kind = declared_params(pipeline["plan"]).get(name)
            ends = {e: form.get(e, "").strip() for e in ("from", "to")}
            if kind == "int":
                ends = {e: requests.form_integer(v) for e, v in ends.items()}
            loaded = requests.load_fields({"param": name, **ends}, BackfillCreateSchema(), "form")
            body = {"param": name, "from": loaded["value_from"], "to": loaded["value_to"]}
            with self.deps.db.transaction() as cur:
                created = create_backfill(
                    cur,
                    pid,
                    body,
                    req.context.principal.name,
                    new_id=self.deps.new_id,
                    request_id=req.context.request_id,
                )
                admitted = admit_waiting(cur, new_id=self.deps.new_id)
        for admission in admitted:
            if admission.needs_wake:
                wake(self.deps, admission.run)
        raise falcon.HTTPSeeOther(f"{PREFIX}/backfills/{created['id']}?notice=backfill_started")


class BackfillPage(ConsolePage):
    """One backfill: counters, progress, each value with its run and status; live (the
    page refreshes itself) while it runs; Cancel for operators while it runs."""

    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response, backfill_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            view = _progress(get_backfill_view(cur, str(backfill_id)))
            pipeline = get_pipeline(cur, str(view["pipeline_id"]), include_deleted=True)
        running = view["status"] == BackfillStatus.RUNNING
        self.console.render(
            req,
            resp,
            "backfill.html",
            backfill=view,
            pipeline=pipeline,
            refresh_ms=self.console.settings.refresh_ms if running else 0,
            notice=_notice(req),
        )


class BackfillCancelAction(ConsolePage):
    roles = {"POST": OPERATE}

    def on_post(self, req: falcon.Request, resp: falcon.Response, backfill_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            _, changes = cancel_backfill(
                cur, str(backfill_id), req.context.principal.name, request_id=req.context.request_id
            )
        for change in changes:
            wake(self.deps, change.run)
        raise falcon.HTTPSeeOther(f"{PREFIX}/backfills/{backfill_id}?notice=backfill_canceled")
