"""File-arrival schedules (`{"watch": GLOB}`): what makes one valid, the settled files the
coordinator's watcher (service/watcher.py) records, and the admission of the pending ones.

A file's identity is its path relative to `ETL_DATA_DIR` and the SHA-256 of its content,
unique per pipeline in `watched_files`: a restart, a second coordinator or a re-created
schedule records nothing already known, and a file whose content changes is another file.
A recorded file waits (pending) until its pipeline has room, as a backfill's values do
(service/domain/backfills.py): it is admitted by `service.domain.runs.admit_run` with
`params {"file": PATH}` and the key `watch:<schedule>:<identity>`, and its row takes the
run's id in the same transaction, so none is admitted twice or lost, and none is ever
`skipped` for `queue_full` or `busy`. Backfills and watched files share
`BACKFILL_ACTIVE_LIMIT` of the pipeline's slots; the others stay for clock fires and manual
triggers (docs/decisions.md).

Every function works on the caller's cursor, in the caller's transaction. After COMMIT the
caller wakes the dag-advancer for each admission that `needs_wake`."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dag import GLOBAL_ACTIVE_LIMIT, PassRoom, RunStatus
from dag.params import declared_params
from dag.paths import relative_path_problem
from service.domain.db import Cursor, execute, fetch_all, fetch_one
from service.domain.runs import Admission, admit_run, lock_admission
from service.errors import Conflict, ServiceError, ValidationFailed

PRINCIPAL = "watcher"  # who admits a watched file's run (`created_by`)
FILE_PARAM = "file"  # the parameter a watched file's path is given in (docs/schedules.md)
GLOB_CHARACTERS = "*?["


def trigger_key(schedule_id: str, path: str, digest: str) -> str:
    """`watch:<schedule id>:<identity>`, the identity being the SHA-256 (hex) of the path,
    a NUL and the content digest: unique per file, of fixed length whatever the path."""
    identity = hashlib.sha256(f"{path}\0{digest}".encode("utf-8", "surrogateescape"))
    return f"watch:{schedule_id}:{identity.hexdigest()}"


def check_watch(plan: Any, glob: str) -> None:
    """`ValidationFailed` naming `watch` when the glob is no relative path under
    `ETL_DATA_DIR` (absolute, `..`, empty) or the plan declares no `string` parameter
    `file`."""
    if problem := relative_path_problem(glob):
        raise ValidationFailed(
            f"watch: {problem}", details=[{"field": "watch", "message": problem}]
        )
    if declared_params(plan).get(FILE_PARAM) != "string":
        message = (
            f"the plan must declare a string parameter {FILE_PARAM!r} (each file's run gets"
            f" its path in params.{FILE_PARAM})"
        )
        raise ValidationFailed(
            f"watch: {message}", details=[{"field": "watch", "message": message}]
        )


def triggerable_path_problem(path: str) -> str | None:
    """Why a watched file's relative path can never be a run's `file` value (a name
    holding a glob character, or no relative file path), or None."""
    if any(c in path for c in GLOB_CHARACTERS):
        return "its name holds a glob character (*, ? or [)"
    return relative_path_problem(path)


@dataclass(frozen=True)
class FoundFile:
    """A settled file: its path relative to `ETL_DATA_DIR`, its content digest, its size."""

    path: str
    digest: str
    size: int


def list_live_watches(cur: Cursor) -> list[dict]:
    """Every live watch schedule of a live pipeline: `id`, `pipeline_id`, `watch`."""
    return fetch_all(cur, "list_live_watches", {})


def record_files(cur: Cursor, schedule_id: str, files: Sequence[FoundFile]) -> list[str]:
    """Record `files` (settled, found by live schedule `schedule_id`) in name order as
    pending, skipping those the pipeline knows already; the paths recorded."""
    if not files:
        return []
    ordered = sorted(files, key=lambda f: f.path)
    params = {
        "schedule_id": schedule_id,
        "paths": [f.path for f in ordered],
        "digests": [f.digest for f in ordered],
        "sizes": [f.size for f in ordered],
    }
    return [r["path"] for r in fetch_all(cur, "record_files", params)]


def admit_waiting_files(
    cur: Cursor, *, new_id: Callable[[], uuid.UUID] = uuid.uuid4, limit: int = 50
) -> list[Admission]:
    """Admit the oldest pending files of every live watch schedule whose pipeline has room
    (as `service.domain.backfills.admit_waiting` counts it, backfills' runs and watched
    files' together), at most `limit` in all. A file whose admission is refused (the
    pipeline is paused, its plan no longer validates or declares `file`) stays pending."""
    lock_admission(cur)
    admitted: list[Admission] = []
    total = fetch_one(cur, "count_all_active_runs") or {"active": 0}
    room = PassRoom(total=GLOBAL_ACTIVE_LIMIT - total["active"], left=limit)
    for schedule in fetch_all(cur, "list_waiting_watches", {}):
        pipeline = str(schedule["pipeline_id"])
        free = room.of(pipeline, schedule["waiting"], schedule["active"])
        if schedule["paused"] or free <= 0:
            continue
        pending = fetch_all(
            cur, "next_pending_files", {"schedule_id": schedule["id"], "limit": free}
        )
        batch = _admit_files(cur, schedule, pending, new_id)
        admitted += batch
        room.take(pipeline, len(batch))
    return admitted


def _admit_files(
    cur: Cursor, schedule: dict, pending: list[dict], new_id: Callable[[], uuid.UUID]
) -> list[Admission]:
    """Admit a schedule's next files behind one savepoint: a refusal (`ServiceError`)
    takes back this schedule's admissions of the pass, leaving its files pending."""
    schedule_id = str(schedule["id"])
    cur.execute("SAVEPOINT watched_files")
    admitted: list[Admission] = []
    try:
        for file in pending:
            admission = admit_run(
                cur,
                str(schedule["pipeline_id"]),
                trigger_key(schedule_id, file["path"], file["digest"]),
                PRINCIPAL,
                params={FILE_PARAM: file["path"]},
                new_id=new_id,
                locked=True,
            )
            if admission.run["status"] == RunStatus.SKIPPED:
                raise Conflict("no room after all")  # never under the lock: room was counted
            execute(cur, "set_file_run", {"seq": file["seq"], "run_id": admission.run["id"]})
            admitted.append(admission)
    except ServiceError:
        cur.execute("ROLLBACK TO SAVEPOINT watched_files")
        return []
    if admitted:
        last = {"schedule_id": schedule_id, "run_id": admitted[-1].run["id"]}
        execute(cur, "record_watch_run", last)
    return admitted
