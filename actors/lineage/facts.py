"""What a lineage event tells besides its notice, read from the state database after the
state change committed: the run's pipeline, trace id and plan, its steps' counters and
columns. Runs on the emitter's thread and connection, never inside an executor's or the
advancer's transaction."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psycopg2
from openlineage.client.event_v2 import RunEvent

from actors.lineage.events import Notice, Places, RunFacts, StepFacts, compose
from actors.sql import LINEAGE_QUERIES
from dag import parse_plan

log = logging.getLogger("etl.lineage")


class EventBuilder:
    """Turns notices into events, reading their facts on a connection of its own (opened
    on first use, opened again after it was lost)."""

    def __init__(
        self, connect: Callable[[], Any], *, namespace: str, places: Places | None
    ) -> None:
        self._connect = connect
        self._conn = None
        self.namespace = namespace
        self.places = places

    def __call__(self, notice: Notice) -> RunEvent | None:
        """The event of `notice`; None when its run is gone (purged, deleted)."""
        try:
            return self._build(notice)
        except psycopg2.Error:
            self.close()  # a lost session is opened again for the next notice
            raise

    def _build(self, notice: Notice) -> RunEvent | None:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
            self._conn.autocommit = True
        with self._conn.cursor() as cur:
            facts = read_run_facts(cur, notice.run_id)
            if facts is None:
                return None
            if notice.step is not None and notice.attempt is None:
                notice = replace(notice, attempt=last_expired_attempt(cur, notice))
                if notice.attempt is None:
                    return None
        return compose(notice, facts, namespace=self.namespace, places=self.places)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg2.Error:
                pass
        self._conn = None


def read_run_facts(cur, run_id: str) -> RunFacts | None:
    """The facts of run `run_id` (None if there is no such run)."""
    cur.execute(LINEAGE_QUERIES["get_lineage_run"], {"run_id": run_id})
    row = cur.fetchone()
    if row is None:
        return None
    pipeline, trace_id, error, plan, params = row
    cur.execute(LINEAGE_QUERIES["list_lineage_steps"], {"run_id": run_id})
    steps = {
        name: StepFacts(
            records_in=records_in,
            records_out=records_out,
            rejected=rejected,
            columns=None if columns is None else tuple((c, t) for c, t in columns),
            error=step_error,
            checks=tuple(checks or ()),
        )
        for name, records_in, records_out, rejected, columns, step_error, checks in cur.fetchall()
    }
    return RunFacts(pipeline, trace_id, parse_plan(plan), steps, error, params or {})


def last_expired_attempt(cur, notice: Notice) -> int | None:
    """The attempt the reaper ended for the notice's step (None: none did)."""
    cur.execute(
        LINEAGE_QUERIES["get_expired_attempt"], {"run_id": notice.run_id, "name": notice.step}
    )
    row = cur.fetchone()
    return None if row is None else row[0]
