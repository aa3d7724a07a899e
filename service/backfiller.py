"""The backfiller: admits the pending values of backfills as their pipelines get room
(`service.domain.backfills.admit_waiting`), every `every_s` seconds, in the coordinator
process (`etl coordinator`). Everything it knows is in the database: a restart (or a
SIGKILL) of the coordinator loses no value and admits none twice, and two coordinators
serialise on the admission lock. Its session commits asynchronously
(`commit_asynchronously`: a pass is lost whole or not at all). After COMMIT it wakes the
dag-advancer for each admitted run; a lost wake-up is re-sent by the sweep."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from actors import send_advance_run
from ddl import connector
from service.config import Config
from service.domain.backfills import admit_waiting, commit_asynchronously
from service.passes import Connect, PassLoop, Wake

log = logging.getLogger("etl.backfiller")

DEFAULT_EVERY_S = 0.5


class Backfiller(PassLoop):
    """A thread calling `admit_once` every `every_s` until `shutdown`."""

    what = "admission pass"

    def __init__(
        self,
        connect: Connect,
        wake: Wake,
        *,
        every_s: float = DEFAULT_EVERY_S,
        new_id: Callable[[], uuid.UUID] = uuid.uuid4,
    ):
        super().__init__("backfiller", connect, wake, every_s, log)
        self._new_id = new_id
        self.every_s = every_s

    def run_pass(self) -> int:
        return self.admit_once()

    def admit_once(self) -> int:
        """One admission pass in one transaction; the number of runs admitted."""
        with self._session.transaction() as cur:
            commit_asynchronously(cur)
            admitted = admit_waiting(cur, new_id=self._new_id)
        for admission in admitted:
            self._admitted(admission)
        return len(admitted)


def start_backfiller(cfg: Config, broker: Any) -> Backfiller:
    """The coordinator's backfiller, started: admissions in `cfg.database_url`, wake-ups of
    the dag-advancer through `broker`."""

    def wake(run_id: str, trace_id: str) -> None:
        send_advance_run(broker, run_id, trace_id)

    backfiller = Backfiller(connector(cfg.database_url, "etl-backfiller"), wake)
    backfiller.start()
    return backfiller
