"""What a lineage event tells besides its notice, read from the state database after the
state change committed: the run's pipeline, trace id and plan, its steps' counters and
columns. Runs on the emitter's thread and connection, never inside an executor's or the
advancer's transaction."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from openlineage.client.event_v2 import RunEvent

from actors.lineage.events import Notice, Places, RunFacts, StepFacts, compose
from actors.sql import LINEAGE_QUERIES
from dag import parse_plan
from ddl import KeptSession

log = logging.getLogger("etl.lineage")


class EventBuilder:
    """Turns notices into events, reading their facts on a session of its own (opened on
    first use, opened again after it was lost)."""

    def __init__(
        self, connect: Callable[[], Any], *, namespace: str, places: Places | None
    ) -> None:
        self._session = KeptSession(connect)
        self.namespace = namespace
        self.places = places

    def __call__(self, notice: Notice) -> RunEvent | None:
        """The event of `notice`; None when its run is gone (purged, deleted)."""
        with self._session.transaction() as cur:
            facts = read_run_facts(cur, notice.run_id)
            if facts is None:
                return None
            if notice.step is not None and notice.attempt is None:
                notice = replace(notice, attempt=last_expired_attempt(cur, notice))
                if notice.attempt is None:
                    return None
        return compose(notice, facts, namespace=self.namespace, places=self.places)

    def close(self) -> None:
        self._session.close()


def read_run_facts(cur, run_id: str) -> RunFacts | None:
    """The facts of run `run_id` (None if there is no such run)."""
    cur.execute(LINEAGE_QUERIES["get_lineage_run"], {"run_id": run_id})
    run = cur.fetchone()
    if run is None:
        return None
    cur.execute(LINEAGE_QUERIES["list_lineage_steps"], {"run_id": run_id})
    steps = {
        row["name"]: StepFacts(
            records_in=row["records_in"],
            records_out=row["records_out"],
            rejected=row["rejected"],
            columns=None if row["columns"] is None else tuple((c, t) for c, t in row["columns"]),
            error=row["error"],
            checks=tuple(row["checks"] or ()),
        )
        for row in cur.fetchall()
    }
    plan = parse_plan(run["plan"])
    return RunFacts(run["name"], run["trace_id"], plan, steps, run["error"], run["params"] or {})


def last_expired_attempt(cur, notice: Notice) -> int | None:
    """The attempt the reaper ended for the notice's step (None: none did)."""
    cur.execute(
        LINEAGE_QUERIES["get_expired_attempt"], {"run_id": notice.run_id, "name": notice.step}
    )
    row = cur.fetchone()
    return None if row is None else row["number"]
