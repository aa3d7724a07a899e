"""A pass every few seconds on a thread of its own, on a session it keeps: the coordinator's
backfiller and file watcher. A failed pass is logged and the next one runs as usual (a lost
session is opened again, `ddl.KeptSession`); the runs a pass admitted are logged and the
dag-advancer woken for them after COMMIT (a lost wake-up is re-sent by the sweep)."""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable

import psycopg2
import psycopg2.extensions

from ddl import KeptSession
from service.domain.runs import Admission

Connect = Callable[[], psycopg2.extensions.connection]
Wake = Callable[[str, str], None]


class PassLoop(abc.ABC):
    """A daemon thread named `name` calling `run_pass` every `every_s` seconds until
    `shutdown`; `wake(run_id, trace_id)` wakes the dag-advancer for a run; `log` is the
    logger of the subclass, `what` names a pass in its log lines."""

    what = "pass"

    def __init__(self, name: str, connect: Connect, wake: Wake, every_s: float, log):
        self._name = name
        self._session = KeptSession(connect)
        self._wake = wake
        self._every_s = every_s
        self._log = log
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def run_pass(self) -> int:
        """One pass; the number of runs admitted (the backfiller's, the watcher's)."""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._every_s + 30)
        self._session.close()

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.run_pass()
            except psycopg2.Error as exc:
                self._log.warning("%s: %s failed: %s", self._name, self.what, str(exc).strip())
            except Exception:
                self._log.exception("%s: %s failed", self._name, self.what)

    def _admitted(self, admission: Admission) -> None:
        """Log a run the pass admitted (committed) and wake the dag-advancer if it needs it."""
        run = admission.run
        self._log.info(
            "%s: %s run", run["trigger_key"], admission.outcome,
            extra={"run_id": str(run["id"]), "pipeline_id": str(run["pipeline_id"])},
        )  # fmt: skip
        if not admission.needs_wake:
            return
        try:
            self._wake(str(run["id"]), run["trace_id"])
        except Exception:  # the sweep re-sends lost wake-ups
            self._log.warning(
                "%s: wake-up failed; the sweep re-sends it", self._name, exc_info=True
            )
