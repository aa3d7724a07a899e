"""The backfiller: admits the pending values of backfills as their pipelines get room
(`service.domain.backfills.admit_waiting`), every `every_s` seconds, in the coordinator
process (`etl coordinator`). Everything it knows is in the database: a restart (or a
SIGKILL) of the coordinator loses no value and admits none twice, and two coordinators
serialise on the admission lock. Its session commits asynchronously
(`commit_asynchronously`: a pass is lost whole or not at all). After COMMIT it wakes the
dag-advancer for each admitted run; a lost wake-up is re-sent by the sweep."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

import psycopg2
import psycopg2.extensions

from actors import send_advance_run
from ddl import KeptSession, connector
from service.config import Config
from service.domain.backfills import admit_waiting, commit_asynchronously

log = logging.getLogger("etl.backfiller")

DEFAULT_EVERY_S = 0.5

Connect = Callable[[], psycopg2.extensions.connection]
Wake = Callable[[str, str], None]


class Backfiller:
    """A thread calling `admit_once` every `every_s` until `shutdown`."""

    def __init__(
        self,
        connect: Connect,
        wake: Wake,
        *,
        every_s: float = DEFAULT_EVERY_S,
        new_id: Callable[[], uuid.UUID] = uuid.uuid4,
    ):
        self._session = KeptSession(connect)
        self._wake = wake
        self._new_id = new_id
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="backfiller", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.every_s + 30)
        self._session.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.admit_once()
            except psycopg2.Error as exc:
                log.warning("backfiller: admission pass failed: %s", str(exc).strip())
            except Exception:
                log.exception("backfiller: admission pass failed")

    def admit_once(self) -> int:
        """One admission pass in one transaction; the number of runs admitted."""
        with self._session.transaction() as cur:
            commit_asynchronously(cur)
            admitted = admit_waiting(cur, new_id=self._new_id)
        for admission in admitted:
            run = admission.run
            log.info(
                "%s: %s run", run["trigger_key"], admission.outcome,
                extra={"run_id": str(run["id"]), "pipeline_id": str(run["pipeline_id"])},
            )  # fmt: skip
            if admission.needs_wake:
                try:
                    self._wake(str(run["id"]), run["trace_id"])
                except Exception:  # the sweep re-sends lost wake-ups
                    log.warning("backfiller: wake-up failed; the sweep re-sends it", exc_info=True)
        return len(admitted)


def start_backfiller(cfg: Config, broker: Any) -> Backfiller:
    """The coordinator's backfiller, started: admissions in `cfg.database_url`, wake-ups of
    the dag-advancer through `broker`."""

    def wake(run_id: str, trace_id: str) -> None:
        send_advance_run(broker, run_id, trace_id)

    backfiller = Backfiller(connector(cfg.database_url, "etl-backfiller"), wake)
    backfiller.start()
    return backfiller
