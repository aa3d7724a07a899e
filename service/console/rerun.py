"""Rerun from the run page: where a failed run's Resume can only fail again because its
revision's plan is at fault and a later revision fixed it (a step failed on its input: a
resume re-reads the same input with the same plan), the page offers Rerun beside Resume
and says which revision each would use (`rerun_offer`, plain values in). Its button
(`POST /ui/runs/{id}/rerun`, admin and operator) calls `service.domain.reruns.rerun_run`,
as `POST /api/v1/runs/{id}/rerun` does: a new run of the current revision with the run's
values, the same audit row and wake-up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import falcon

from dag import AttemptOutcome, RunStatus, StepStatus
from service.console.web import PREFIX, ConsolePage, as_console_errors
from service.domain.deps import wake
from service.domain.principals import OPERATE
from service.domain.reruns import rerun_run
from service.domain.runs import AdmissionOutcome

# The notice the action redirects with (`?notice=`), added to the console's fixed texts.
NOTICES = {
    "rerun": "Rerun created: a new run of the pipeline's current revision with the same"
    " parameter values.",
}


def rerun_offer(
    run: Mapping[str, Any], current_revision: int | None, pipeline_deleted: bool
) -> dict[str, Any] | None:
    """What the run page offers beside Resume, or None: for a failed run of a live
    pipeline whose current revision is newer than the run's, `resume_revision` (the run's:
    a resume stays on it), `rerun_revision` (the current one) and `input_error_steps`, the
    steps that failed on their input (non-empty: a resume can only fail again)."""
    if run["status"] != RunStatus.FAILED or pipeline_deleted or current_revision is None:
        return None
    if current_revision <= run["revision"]:
        return None
    failed_on_input = [
        s["name"]
        for s in run.get("steps") or []
        if s["status"] == StepStatus.FAILED
        and s.get("attempts")
        and s["attempts"][-1].get("outcome") == AttemptOutcome.INPUT_ERROR
    ]
    return {
        "resume_revision": run["revision"],
        "rerun_revision": current_revision,
        "input_error_steps": failed_on_input,
    }


class RerunAction(ConsolePage):
    roles = {"POST": OPERATE}

    def on_post(self, req: falcon.Request, resp: falcon.Response, run_id: Any) -> None:
        with as_console_errors(), self.deps.db.transaction() as cur:
            admission = rerun_run(
                cur,
                str(run_id),
                req.context.principal.name,
                new_id=self.deps.new_id,
                request_id=req.context.request_id,
            )
        if admission.needs_wake:
            wake(self.deps, admission.run)
        created = admission.outcome == AdmissionOutcome.CREATED
        notice = "rerun" if created else admission.outcome
        raise falcon.HTTPSeeOther(f"{PREFIX}/runs/{admission.run['id']}?notice={notice}")
