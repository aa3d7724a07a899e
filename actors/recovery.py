"""Recovery of an attempt from its checkpoint after its database session was lost (a
PostgreSQL restart, a terminated backend): reconnect, fence the attempt and its fused
followers again in a transaction of their own, and go on from the last committed
checkpoint, instead of the step waiting out its lease. The attempt (`actors.attempt`)
then runs its pass again, its group rewound to the committed checkpoints
(`Group.rewind`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg2

from actors.errors import LeaseLost
from actors.leases import Claim, Heartbeat, fence
from actors.settings import ExecutorSettings
from ddl import connection_lost

log = logging.getLogger("etl.executor")
# Pauses between tries to reach a database that went away (restart, terminated sessions).
RECONNECT_WAITS_S = (0.2, 0.5, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0)
MAX_TAKE_BACKS = 10  # per attempt: then the step is left to its lease


def take_back(
    claim: Claim,
    heartbeat: Heartbeat,
    ctx: dict,
    *,
    settings: ExecutorSettings,
    connect: Callable[[], Any],
    drop: Callable[[], None],
    followers: list[Claim],
    stopping: threading.Event,
    clock: Callable[[], float],
) -> bool:
    """After a lost session: reconnect (`connect`; `drop` forgets a session that is gone)
    and fence our attempt (and our `followers'`) in a transaction of its own. True when the
    attempt is still ours (go on from the checkpoint); False when the lease was taken over,
    or the database stayed away until the executor stopped or the step ran out of time (the
    reaper hands the step over then)."""
    s = settings
    given_up = clock() + s.step_timeout_s
    waits = iter(RECONNECT_WAITS_S)
    while not heartbeat.lost.is_set() and clock() < given_up:
        if stopping.wait(next(waits, RECONNECT_WAITS_S[-1])):
            return False
        conn = None
        try:
            conn = connect()
            with conn.cursor() as cur:
                cancel = fence(cur, claim.attempt_id, s.owner, s.lease_ttl_s)
                for follower in followers:
                    fence(cur, follower.attempt_id, s.owner, s.lease_ttl_s)
            conn.commit()
        except LeaseLost as exc:
            _rollback(conn)
            log.warning("lease lost while the database was away: %s", exc, extra=ctx)
            return False
        except psycopg2.Error as exc:
            if not connection_lost(exc):
                raise
            drop()
            continue
        if cancel:
            heartbeat.cancel.set()
        log.info("database back: attempt continues from its checkpoint", extra=ctx)
        return True
    return False


def _rollback(conn: Any) -> None:
    """Roll back; a session that is already gone has nothing to roll back."""
    if conn is None:
        return
    try:
        conn.rollback()
    except psycopg2.Error as exc:
        if not connection_lost(exc):
            raise
