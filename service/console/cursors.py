"""The cursor marks of a pipeline's incremental table ingests on its page: every role sees
them; an admin sets one (`POST .../cursors/set`, form fields `step` and `value`) or resets
one (`POST .../cursors/reset`, form field `step`), back to the page with a notice. The
same domain functions as the REST API (`service.domain.cursors`), the same audit rows."""

from __future__ import annotations

from typing import Any

import falcon

from service.console.web import PREFIX, ConsolePage, as_console_errors
from service.domain.cursors import reset_cursors, set_cursor
from service.domain.principals import ADMIN_ONLY
from service.schemas import requests
from service.schemas.cursors import CursorSetSchema

# The notices these actions redirect with (`?notice=`), added to the console's fixed texts.
NOTICES = {
    "cursor_set": "Cursor mark set: the next run reads the rows above it.",
    "cursor_reset": "Cursor mark reset: the next run reads the table from the start.",
}


class CursorSetAction(ConsolePage):
    roles = {"POST": ADMIN_ONLY}

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        form = req.context.form
        with as_console_errors():
            loaded = requests.load_fields(
                {"value": form.get("value", "").strip()}, CursorSetSchema(), "form"
            )
            with self.deps.db.transaction() as cur:
                set_cursor(
                    cur,
                    str(pipeline_id),
                    form.get("step", ""),
                    loaded["value"],
                    req.context.principal.name,
                    request_id=req.context.request_id,
                )
        raise falcon.HTTPSeeOther(f"{PREFIX}/pipelines/{pipeline_id}?notice=cursor_set")


class CursorResetAction(ConsolePage):
    roles = {"POST": ADMIN_ONLY}

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            reset_cursors(
                cur,
                str(pipeline_id),
                req.context.form.get("step", ""),
                req.context.principal.name,
                request_id=req.context.request_id,
            )
        raise falcon.HTTPSeeOther(f"{PREFIX}/pipelines/{pipeline_id}?notice=cursor_reset")
