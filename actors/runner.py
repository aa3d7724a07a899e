"""The executor's side of a step attempt: claim, run batch by batch, commit fenced.

For every input batch the executor computes the output, writes exports and reject rows (each
idempotent per batch number and invisible until the step commits), then commits the output
batch, the checkpoint (input position, counters, running digests, aggregate state) in ONE
transaction that starts with the lease fence. A crash re-runs only the unfinished batch; a
stale executor's commit changes nothing. That transaction is sent while the next batch is
computed (`actors.committer`); when the sandbox is the state database, a table export's
rows of the batch are staged in it too, and a commit that fails with them (a key another
batch staged, a row too big) sends the attempt back to its checkpoint to stage them batch
by batch, where a staging error is the export step's own (`StagingRefused`).

The claimed step runs with its fusion group (`actors.group`): every input batch goes through
all of its members in one pass; each member still commits its own checkpoint, counters and
digests, all in the batch's one transaction, so the members' checkpoints always fit
together and a group resumes as a group. A follower that fails leaves the group and the
others go on.

The `StepRunner` holds what is the executor process's (its settings, its state session,
the batch committer's session) and claims an attempt; each claimed attempt is an
`actors.attempt.Attempt`, which owns that attempt's state to its ending
(`actors.endings`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg2

from actors.attempt import Attempt, Process
from actors.committer import BatchCommitter
from actors.endings import LEASE_LOST
from actors.leases import Claim, claim_attempt
from actors.recovery import RECONNECT_WAITS_S
from actors.settings import ExecutorSettings
from ddl import KeptSession, connection_lost

__all__ = ["LEASE_LOST", "ExecutorSettings", "StepRunner"]

log = logging.getLogger("etl.executor")


class StepRunner:
    """Runs step attempts for one executor process (one at a time)."""

    def __init__(
        self,
        settings: ExecutorSettings,
        *,
        connect_state: Callable[[], Any],
        connect_sandbox: Callable[[], Any],
        wake_run: Callable[[str, str, int | None], None],
        wake_attempt: Callable[[int, str], None],
        connect_commits: Callable[[], Any] | None = None,
        stopping: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`connect_commits` opens the asynchronous session the batches commit on while
        the next batch is computed (`ddl.connect(..., asynchronous=True)`); without it, or
        with `settings.overlap` off, each batch commits on the state connection and waits."""
        self.settings = settings
        self.stopping = stopping or threading.Event()
        self._session = KeptSession(connect_state)
        self._process = Process(
            settings=settings,
            committer=BatchCommitter(connect_commits if settings.overlap else None),
            state=self._session.connection,
            drop_state=self._session.close,
            connect_state=connect_state,
            connect_sandbox=connect_sandbox,
            wake_run=wake_run,
            wake_attempt=wake_attempt,
            stopping=self.stopping,
            clock=clock,
        )

    def run_attempt(self, attempt_id: int) -> str | None:
        """Run attempt `attempt_id` if it is ours to run; return its outcome (None if it was
        not claimable, e.g. a duplicate or late wake-up)."""
        claim = self._claim(attempt_id)
        if claim is None:
            log.info("attempt not claimable", extra={"attempt_id": attempt_id})
            return None
        return Attempt(claim, self._process).run()

    def _claim(self, attempt_id: int) -> Claim | None:
        """Claim the attempt; a session lost on the way (a restarted database) is reopened
        and the claim tried again once it answers."""
        s = self.settings
        for wait_s in (0.0, *RECONNECT_WAITS_S):
            if self.stopping.wait(wait_s):
                break
            try:
                return claim_attempt(self._session.connection(), attempt_id, s.owner, s.lease_ttl_s)
            except psycopg2.Error as exc:
                if not connection_lost(exc):
                    raise
                self._session.close()
                log.warning("database unavailable for a claim: %s", exc)
        return None  # the sweep sends the wake-up again
