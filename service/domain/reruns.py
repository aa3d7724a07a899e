"""Rerun: a new run of a pipeline's *current* revision with the parameter values of an
earlier run (`POST /runs/{id}/rerun`). A resume stays on the run's own revision (the
specification's rule); a rerun is the way to apply a fixed plan to the same data. It is a
trigger like any other (`admit_run`: same limits, same audit), keyed
`rerun:<run id>:<new run id>`: each call is a new run."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from dag import BUILTIN_PARAMS, SCHEDULE_BUILTINS
from service.domain.db import Cursor, fetch_one
from service.domain.runs import Admission, admit_run, get_run
from service.errors import Conflict, NotFound, ValidationFailed
from service.tracing import RunTrace


def rerun_run(
    cur: Cursor,
    run_id: str,
    principal: str,
    *,
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
    request_id: str | None = None,
    trace: RunTrace | None = None,
) -> Admission:
    """Admit a new run of run `run_id`'s pipeline at its current revision with the run's
    values (a scheduled run's interval too; a new `run_id`). `NotFound` for an unknown run;
    `Conflict` (409, code `params_conflict`) naming each `params.NAME` the current plan no
    longer declares or types otherwise: the request asked nothing wrong, the state moved;
    otherwise what `admit_run` raises."""
    run = get_run(cur, run_id)
    if run is None:
        raise NotFound(f"run {run_id} not found")
    held = run.get("params") or {}
    given = {k: v for k, v in held.items() if k not in BUILTIN_PARAMS}
    builtins = {k: v for k, v in held.items() if k in SCHEDULE_BUILTINS}
    key = f"rerun:{run_id}:{new_id()}"
    live = {"pipeline_id": run["pipeline_id"], "include_deleted": False}
    if fetch_one(cur, "get_pipeline", live) is None:
        raise NotFound(f"the pipeline of run {run_id} was deleted")
    try:
        return admit_run(
            cur,
            str(run["pipeline_id"]),
            key,
            principal,
            params=given,
            builtins=builtins,
            new_id=new_id,
            request_id=request_id,
            trace=trace,
        )
    except ValidationFailed as exc:
        if exc.code != "invalid_params":
            raise
        raise Conflict(
            f"run {run_id}'s values do not fit the pipeline's current revision: {exc.message}",
            code="params_conflict",
            details=exc.details,
        ) from None
