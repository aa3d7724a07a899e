"""A pipeline's lifecycle from its page (admins): Pause and Unpause (`POST`, back to the
page with a notice) and Delete, which asks first: `GET .../delete` is a confirmation page
naming what happens, its form's `POST` deletes (refused with the API's 409 message while runs
are queued or running) and goes to the pipeline list. The same domain functions as the REST
API (`set_paused`, `delete_pipeline`), the same audit rows."""

from __future__ import annotations

from typing import Any

import falcon

from service.console.web import PREFIX, ConsolePage, as_console_errors
from service.domain.pipelines import delete_pipeline, get_pipeline, set_paused
from service.domain.principals import ADMIN_ONLY

# The notices these actions redirect with (`?notice=`), added to the console's fixed texts.
NOTICES = {
    "pipeline_paused": "Pipeline paused: triggers are refused and schedules make no run until"
    " it is unpaused; runs already queued or running go on.",
    "pipeline_unpaused": "Pipeline unpaused: runs are admitted again.",
    "pipeline_deleted": "Pipeline deleted. Its runs stay readable from the runs list.",
}


class _PauseAction(ConsolePage):
    roles = {"POST": ADMIN_ONLY}
    paused: bool

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            set_paused(
                cur,
                str(pipeline_id),
                self.paused,
                req.context.principal.name,
                request_id=req.context.request_id,
            )
        notice = "pipeline_paused" if self.paused else "pipeline_unpaused"
        raise falcon.HTTPSeeOther(f"{PREFIX}/pipelines/{pipeline_id}?notice={notice}")


class PauseAction(_PauseAction):
    paused = True


class UnpauseAction(_PauseAction):
    paused = False


class DeletePage(ConsolePage):
    """`GET`: the confirmation; `POST`: the delete."""

    roles = {"GET": ADMIN_ONLY, "POST": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            pipeline = get_pipeline(cur, str(pipeline_id))
        self.console.render(req, resp, "pipeline_delete.html", pipeline=pipeline)

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            delete_pipeline(
                cur, str(pipeline_id), req.context.principal.name, request_id=req.context.request_id
            )
        raise falcon.HTTPSeeOther(f"{PREFIX}/?notice=pipeline_deleted")
