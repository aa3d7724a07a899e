"""`POST /api/v1/pipelines/preview`: the preview of a plan in the body, or of a saved
pipeline's revision, as JSON (the same answer as `etl preview --json`), through
`service.domain.preview`. Roles as `POST /pipelines`; the body cap of every request."""

from __future__ import annotations

import uuid

import falcon

from service.api.bodies import read_json
from service.api.resources import Resource
from service.domain.pipelines import saved_plan
from service.domain.preview import plan_entity, preview_answer
from service.domain.principals import ADMIN_ONLY
from service.schemas.requests import PreviewRequestSchema


class PreviewResource(Resource):
    roles = {"POST": ADMIN_ONLY}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req, PreviewRequestSchema())
        if "plan" in body:
            plan = body["plan"]
            entity = plan_entity(plan)
            revision = None
        else:
            pipeline_id = str(uuid.UUID(body["pipeline_id"]))
            with self.deps.db.transaction() as cur:
                plan, revision = saved_plan(cur, pipeline_id, body.get("revision"))
            entity = f"pipeline:{pipeline_id}"
        answer = preview_answer(self.deps.config, plan, body["records"])
        with self.deps.db.transaction() as cur:
            what = {"records": body["records"], "ok": answer["ok"]}
            if revision is not None:
                what["revision"] = revision
            self.audit(cur, req, "pipeline.preview", entity, **what)
        resp.media = answer
