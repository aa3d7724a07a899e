"""`/pipelines/{id}/cursors` (list, reset all) and `/pipelines/{id}/cursors/{step}` (set,
reset one): thin faces over `service.domain.cursors`. Reading is for every role; a change
is an admin's, audited."""

from __future__ import annotations

from typing import Any

import falcon

from service.api.bodies import read_json
from service.api.resources import Resource
from service.domain import cursors
from service.domain.principals import ADMIN_ONLY, READ
from service.schemas.cursors import CURSOR, CURSOR_LIST, CursorSetSchema


class CursorsResource(Resource):
    roles = {"GET": READ, "DELETE": ADMIN_ONLY}

    def on_get(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        with self.deps.db.transaction() as cur:
            views = cursors.list_cursors(cur, str(pipeline_id))
        resp.media = CURSOR_LIST.dump({"cursors": views})

    def on_delete(self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any) -> None:
        self.change(req, cursors.reset_cursors, str(pipeline_id), None)
        resp.status = 204


class CursorResource(Resource):
    roles = {"PUT": ADMIN_ONLY, "DELETE": ADMIN_ONLY}

    def on_put(
        self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any, step: str
    ) -> None:
        body = read_json(req, CursorSetSchema())
        view = self.change(req, cursors.set_cursor, str(pipeline_id), step, body["value"])
        resp.media = CURSOR.dump(view)

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, pipeline_id: Any, step: str
    ) -> None:
        self.change(req, cursors.reset_cursors, str(pipeline_id), step)
        resp.status = 204
