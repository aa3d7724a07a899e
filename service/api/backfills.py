"""`/pipelines/{id}/backfills` (list, create), `/backfills/{id}` (read),
`/backfills/{id}/cancel` and `/runs/{id}/rerun`: thin faces over `service.domain.backfills` and
`service.domain.reruns`. A backfill's first values are admitted in the creating transaction
when the pipeline has room; the coordinator's backfiller admits the rest as room appears."""

from __future__ import annotations

from typing import Any

import falcon

from service.api.bodies import read_json
from service.api.resources import Resource, answer_run
from service.domain import backfills, listing, reruns
from service.domain.principals import OPERATE, READ
from service.domain.runs import run_views
from service.schemas.backfills import BACKFILL, BACKFILL_SUMMARY, BackfillCreateSchema


class BackfillsResource(Resource):
    roles = {"GET": READ, "POST": OPERATE}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        self.pipeline_page(req, resp, pipeline_id, listing.list_backfills, BACKFILL_SUMMARY)

    def on_post(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        body = read_json(req, BackfillCreateSchema())
        request = {"from": body["value_from"], "to": body["value_to"]}
        request.update({k: body[k] for k in ("param", "schedule_id") if k in body})
        with self.deps.db.transaction() as cur:
            created = backfills.create_backfill(
                cur,
                str(pipeline_id),
                request,
                req.context.principal.name,
                new_id=self.deps.new_id,
                request_id=req.context.request_id,
            )
            admitted = backfills.admit_waiting(cur, new_id=self.deps.new_id)
            view = backfills.get_backfill_view(cur, created["id"])
        for admission in admitted:
            if admission.needs_wake:
                self.wake(admission.run)
        resp.status = 201
        resp.location = f"/api/v1/backfills/{view['id']}"
        resp.media = BACKFILL.dump(view)


class BackfillResource(Resource):
    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response, backfill_id: Any) -> None:
        with self.deps.db.transaction() as cur:
            view = backfills.get_backfill_view(cur, str(backfill_id))
        resp.media = BACKFILL.dump(view)


class BackfillCancelResource(Resource):
    """Drops the pending values and cancels the queued and running runs: 202."""

    roles = {"POST": OPERATE}

    def on_post(self, req: falcon.Request, resp: falcon.Response, backfill_id: Any) -> None:
        self.read_no_body(req)
        view, changes = self.change(req, backfills.cancel_backfill, str(backfill_id))
        for change in changes:
            self.wake(change.run)
        resp.status = 202
        resp.media = BACKFILL.dump(view)


class RunRerunResource(Resource):
    """A new run of the pipeline's current revision with the run's values: 201 (429 when
    the limits skip it, like a trigger)."""

    roles = {"POST": OPERATE}

    def on_post(self, req: falcon.Request, resp: falcon.Response, run_id: Any) -> None:
        self.read_no_body(req)
        with self.deps.db.transaction() as cur:
            admission = reruns.rerun_run(
                cur,
                str(run_id),
                req.context.principal.name,
                new_id=self.deps.new_id,
                request_id=req.context.request_id,
            )
            (view,) = run_views(cur, [admission.run])
        if admission.needs_wake:
            self.wake(admission.run)
        if admission.outcome == "skipped":
            error = {"code": admission.reason, "message": "refused", "details": []}
            answer_run(resp, 429, view, {"error": error})
        else:
            answer_run(resp, 201, view)
