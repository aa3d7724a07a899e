"""Step-attempt leases: claim, heartbeat, fence. All deadlines are on the database clock.

An executor claims an attempt in one statement, extends the lease from a heartbeat thread on
its own connection, and starts every commit with `fence`: the attempt row is locked and
extended only if the lease is still ours, so a stale executor (paused past its lease and
reaped) commits nothing and stops."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import psycopg2

from actors.errors import LeaseLost
from actors.sql import QUERIES
from ddl import Cursor, KeptSession

log = logging.getLogger("etl.leases")

# Attempts this process refused for their directories and said so: the sweep re-sends their
# wake-up about twice a second, and the reason stays on the attempt, so it is logged once.
_REFUSALS_LOGGED: set[int] = set()


@dataclass(frozen=True)
class Claim:
    """A claimed attempt: which step of which run, and its trace (the run's trace id, the
    id of the span the run's spans are children of, and its W3C sampled flag)."""

    attempt_id: int
    run_id: str
    step_name: str
    number: int
    trace_id: str
    pipeline_id: str
    parent_span_id: str | None = None
    trace_sampled: bool = True


def claim_attempt(conn, attempt_id: int, owner: str, ttl_s: float) -> Claim | None:
    """Take the lease of `attempt_id` for `owner`; None if it is not ours to run. An attempt
    whose step an earlier attempt staged in directories `owner` does not see is left for an
    executor that sees them, the reason in its error (and logged)."""
    params = {"attempt_id": attempt_id, "owner": owner, "ttl_s": ttl_s}
    try:
        with conn.cursor(cursor_factory=Cursor) as cur:
            cur.execute(QUERIES["claim_attempt"], params)
            row = cur.fetchone()
            if row is None:
                cur.execute(QUERIES["claim_refused_for_directories"], params)
                refused = cur.fetchone()
                if refused is not None and attempt_id not in _REFUSALS_LOGGED:
                    if len(_REFUSALS_LOGGED) >= 10_000:
                        _REFUSALS_LOGGED.clear()
                    _REFUSALS_LOGGED.add(attempt_id)
                    log.warning("attempt %s not claimed: %s", attempt_id, refused["error"])
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    if row is None:
        return None
    return Claim(
        attempt_id,
        str(row["run_id"]),
        row["step_name"],
        row["number"],
        row["trace_id"],
        str(row["pipeline_id"]),
        row["parent_span_id"],
        row["trace_sampled"],
    )


def fence(cur, attempt_id: int, owner: str, ttl_s: float, *, batches: int = 0) -> bool:
    """Lock and extend our attempt inside the caller's transaction; returns the run's
    cancel flag. Raises LeaseLost when the lease is no longer ours."""
    cur.execute(
        QUERIES["fence_attempt"],
        {"attempt_id": attempt_id, "owner": owner, "ttl_s": ttl_s, "batches": batches},
    )
    row = cur.fetchone()
    if row is None:
        raise LeaseLost(f"attempt {attempt_id}: lease no longer held by {owner}")
    return bool(row[0])


class Heartbeat:
    """Extends a lease every `interval_s` on its own connection until stopped; sets `lost`
    when the lease was taken over and `cancel` when the run asks to stop. The attempts of
    fused followers joined later (`follow`) are extended with it."""

    def __init__(
        self,
        connect,
        attempt_id: int,
        owner: str,
        *,
        ttl_s: float,
        interval_s: float,
        max_age_s: float | None = None,
        clock=time.monotonic,
    ):
        self._connect = connect
        self._max_age_s = max_age_s
        self._clock = clock
        self._attempt_id = attempt_id
        self._attempt_ids = [attempt_id]
        self._owner = owner
        self._ttl_s = ttl_s
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.lost = threading.Event()
        self.cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def follow(self, attempt_id: int, *, extra_age_s: float = 0.0) -> None:
        """Extend the lease of `attempt_id` (a fused follower's) too from now on; the
        group may run `extra_age_s` longer before the beats stop."""
        self._attempt_ids = [*self._attempt_ids, attempt_id]
        if self._max_age_s is not None:
            self._max_age_s += extra_age_s

    def unfollow(self, attempt_id: int) -> None:
        """Stop extending a follower's lease (its attempt ended)."""
        self._attempt_ids = [i for i in self._attempt_ids if i != attempt_id]

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval_s + 5)

    def _run(self) -> None:
        session = KeptSession(self._connect)
        born = self._clock()
        while not self._stop.wait(self._interval_s):
            if self._max_age_s is not None and self._clock() - born > self._max_age_s:
                # The step thread is stuck past its timeout (e.g. blocked in a call that
                # never returns): stop extending the lease so the reaper hands the step to
                # another attempt instead of the run hanging forever.
                log.warning(
                    "attempt past its timeout; lease left to expire",
                    extra={"attempt_id": self._attempt_id},
                )
                break
            params = {"attempt_ids": self._attempt_ids, "owner": self._owner, "ttl_s": self._ttl_s}
            try:
                with session.transaction() as cur:
                    cur.execute(QUERIES["heartbeat_attempt"], params)
                    rows = cur.fetchall()
            except psycopg2.Error as exc:
                # A missed beat is not fatal: the lease has ttl/interval beats of slack, and
                # every commit is fenced anyway.
                log.warning("heartbeat failed: %s", exc, extra={"attempt": self._attempt_id})
                continue
            # Only the claimed attempt's lease decides; a follower's is fenced at its commits.
            mine = next((r for r in rows if r["id"] == self._attempt_id), None)
            if mine is None:
                log.warning("lease lost", extra={"attempt": self._attempt_id})
                self.lost.set()
                break
            if mine["cancel_requested"]:
                self.cancel.set()
        session.close()
