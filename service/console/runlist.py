"""The console's runs page: every run, newest first, filtered by status, pipeline and the
days it was created in, keyset-paginated."""

from __future__ import annotations

import falcon

from service.console.web import ConsolePage, as_console_errors, query_param
from service.domain.db import Cursor, database_now
from service.domain.listing import RUN_STATUSES, list_pipelines, list_runs, parse_uuid
from service.domain.pipelines import get_pipeline
from service.domain.principals import READ
from service.errors import NotFound

PAGE_SIZE = 50


class RunsPage(ConsolePage):
    """Every run, newest first, filtered by status, pipeline (by name, or by id from a
    pipeline's page) and creation days (`from`, `to`: UTC dates, both included),
    keyset-paginated, with how long each took or has been running."""

    roles = {"GET": READ}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        status, pipeline_id = query_param(req, "status"), query_param(req, "pipeline_id")
        name = query_param(req, "pipeline")
        days = {"created_from": query_param(req, "from"), "created_to": query_param(req, "to")}
        with as_console_errors(), self.deps.db.transaction() as cur:
            if name is not None:
                named, _ = list_pipelines(cur, name=name, limit=1)
                pipeline_id = str(named[0]["id"]) if named else None
            elif parse_uuid(pipeline_id, "pipeline_id") is not None:
                name = _pipeline_name(cur, str(pipeline_id))
            if name is not None and pipeline_id is None:
                rows, cursor = [], None  # no pipeline of that name: no runs
            else:
                rows, cursor = list_runs(
                    cur,
                    status=status,
                    pipeline_id=pipeline_id,
                    limit=PAGE_SIZE,
                    before=query_param(req, "before"),
                    **days,
                )
            now = database_now(cur)
        self.console.render(
            req,
            resp,
            "runs.html",
            runs=rows,
            next_cursor=cursor,
            paged=query_param(req, "before") is not None,
            status=status,
            pipeline_id=pipeline_id,
            pipeline_name=name,
            statuses=RUN_STATUSES,
            days=days,
            now=now,
        )


def _pipeline_name(cur: Cursor, pipeline_id: str) -> str | None:
    """The name of a pipeline, None when there is none of that id (its runs may still be
    listed: a deleted pipeline's runs stay readable)."""
    try:
        return get_pipeline(cur, pipeline_id)["name"]
    except NotFound:
        return None
