"""OpenLineage run events of pipeline runs and step attempts (docs/lineage.md).

A process turns lineage on with `start_lineage` (the executor and the coordinator do, at
start); it stays off unless the `openlineage-python` client's own configuration names a
transport. The engine calls the hooks below right AFTER the transaction that changed a
run's or an attempt's state committed, never inside it: each only queues a notice of plain
values (`LineageEmitter.notify`, which never waits) and does nothing while lineage is off.
The emitter's thread reads the rest from the database and emits.

Like a logging handler, the emitter is per process: the hooks sit in code that other
parts of the engine share (runner, endings, advancer, sweep), and threading a collaborator
through all of them would change every signature for an optional side channel."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from actors.leases import Claim
from actors.lineage.notices import ABORT, RUN_EVENT, START, STEP_EVENT, Notice
from actors.lineage.places import Places, Sandbox, sandbox_of

__all__ = [
    "Notice",
    "Places",
    "Sandbox",
    "runs_moved",
    "sandbox_of",
    "start_lineage",
    "steps_ended",
    "steps_expired",
    "steps_started",
    "stop_lineage",
]

log = logging.getLogger("etl.lineage")
DEFAULT_NAMESPACE = "default"  # the OpenLineage client's own default
_active: Any = None  # (LineageEmitter, EventBuilder) while lineage is on


def start_lineage(
    connect_state: Callable[[], Any],
    *,
    places: Places | None,
    environ: Mapping[str, str],
    client: Any = None,
) -> Any:
    """Turn lineage on for this process if the client is configured (`client` given, or
    `configured_client()`); returns the emitter, None when lineage stays off. The job
    namespace is `OPENLINEAGE_NAMESPACE` (default `default`). `places` names the files and
    tables of step datasets (None: step events carry no datasets)."""
    # The client is imported only here: the processes that never turn lineage on (the
    # API's workers, the CLI) do not pay for importing it.
    from actors.lineage.emitter import LineageEmitter, configured_client
    from actors.lineage.facts import EventBuilder

    global _active
    client = client if client is not None else configured_client()
    if client is None:
        log.debug("OpenLineage off: the client's configuration names no transport")
        return None
    namespace = environ.get("OPENLINEAGE_NAMESPACE") or DEFAULT_NAMESPACE
    build = EventBuilder(connect_state, namespace=namespace, places=places)
    emitter = LineageEmitter(client, build).start()
    _active = (emitter, build)
    where = getattr(client.transport, "url", None) or "where the client's configuration says"
    log.info(
        "OpenLineage on: events sent by the %s transport to %s, namespace %r",
        client.transport.kind,
        where,
        namespace,
    )
    return emitter


def stop_lineage(timeout_s: float = 5.0) -> None:
    """Emit what is queued (for up to `timeout_s`) and turn lineage off."""
    global _active
    if _active is None:
        return
    emitter, build = _active
    _active = None
    if not emitter.close(timeout_s):
        log.warning("lineage: events still queued at stop were not emitted")
    build.close()
    if emitter.dropped or emitter.failed:
        log.warning(
            "lineage: %d event(s) dropped (queue full), %d failed",
            emitter.dropped,
            emitter.failed,
        )


def _notify(notice: Notice) -> None:
    if _active is not None:
        _active[0].notify(notice)


def runs_moved(started: Iterable[str], finished: Iterable[tuple[str, str]]) -> None:
    """Runs that started (START), and that finished with a status (COMPLETE, FAIL, ABORT)."""
    if _active is None:
        return
    at = datetime.now(UTC)
    for run_id in started:
        _notify(Notice(START, str(run_id), at))
    for run_id, status in finished:
        event_type = RUN_EVENT.get(status)
        if event_type is not None:
            _notify(Notice(event_type, str(run_id), at))


def steps_started(claims: Iterable[Claim]) -> None:
    """Attempts an executor claimed (START)."""
    if _active is None:
        return
    at = datetime.now(UTC)
    for c in claims:
        _notify(Notice(START, c.run_id, at, c.step_name, c.number))


def steps_ended(claims: Iterable[Claim | None], outcome: str, error: str | None = None) -> None:
    """Attempts that ended with `outcome` (COMPLETE, FAIL or ABORT; `error` says why)."""
    event_type = STEP_EVENT.get(outcome)
    if _active is None or event_type is None:
        return
    at = datetime.now(UTC)
    for c in claims:
        if c is not None:
            _notify(Notice(event_type, c.run_id, at, c.step_name, c.number, error))


def steps_expired(reaped: Iterable[tuple[str, str]]) -> None:
    """Steps (run id, name) whose attempt the reaper ended, its lease expired (ABORT)."""
    if _active is None:
        return
    at = datetime.now(UTC)
    for run_id, step in reaped:
        _notify(Notice(ABORT, run_id, at, step, None, "lease expired"))
