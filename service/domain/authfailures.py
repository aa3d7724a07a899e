"""Failed authentications: a bearer token the API does not know (or no longer accepts) and a
console sign-in with such a token. Called by `service.api.auth` and the console's sign-in.

Each failure is counted per client address in PostgreSQL (`auth_failures`), so every
gunicorn worker sees the same count, and its answer is delayed by `penalty_s` of the
consecutive failures: 0.1 s doubling to at most 2 s. The delay holds a server thread, so a
process lets at most `PENALTY_SLOTS` penalised answers wait at once (`Penalties`): past
that a failure is answered at once (still counted and audited), and a flood of guesses
cannot take every thread from the real admin. A valid token is never delayed, and
its use clears the address's count (`service.domain.principals.find_principal`) once the
last failure is `MAX_PENALTY_S` old, so the real admin is never locked out, even from an
address that guessed, while a guesser holding some valid token cannot undo the penalty by
interleaving it with the guesses. After 15 minutes without a failure the count starts over.

The audit gets at most one `auth.failed` row per address and minute, carrying how many
failures it stands for; the count, the audit row and its bookkeeping commit in one
transaction, under the address row's lock, so concurrent workers never write two."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from service.domain.audit import insert_audit
from service.domain.db import Database, execute, fetch_one

FIRST_PENALTY_S = 0.1
MAX_PENALTY_S = 2.0
ANONYMOUS = "anonymous"  # who the audit names for a failed authentication
# Penalised answers waiting at once per process: a quarter of a gunicorn worker's threads
# (`service.run.gunicorn.API_THREADS`, 64), so the rest always serve valid tokens.
PENALTY_SLOTS = 16


def penalty_s(failures: int) -> float:
    """The delay of the answer to the `failures`-th consecutive failure (1-based):
    0.1, 0.2, 0.4, 0.8, 1.6, then 2.0 s."""
    doublings = min(max(failures - 1, 0), 16)  # past the cap anyway; 2**n stays a float
    return min(FIRST_PENALTY_S * 2**doublings, MAX_PENALTY_S)


@dataclass(frozen=True)
class Failure:
    """A failure as counted: the address's consecutive failures, the delay its answer gets,
    and whether it wrote an audit row."""

    failures: int
    delay_s: float
    audited: bool


def record_failure(
    db: Database, client_addr: str, via: str, *, request_id: str | None = None
) -> Failure:
    """Count a failed authentication from `client_addr` (`via`: `bearer` or `sign_in`) and
    audit it when the address has no audit row from the last minute. The caller waits
    `delay_s` after this returns (the transaction is committed by then)."""
    with db.transaction() as cur:
        row = fetch_one(cur, "record_auth_failure", {"client_addr": client_addr})
        assert row is not None
        delay = penalty_s(row["failures"])
        if row["audit_due"]:
            insert_audit(
                cur,
                principal=ANONYMOUS,
                action="auth.failed",
                entity_type="client",
                entity_id=client_addr,
                details={
                    "via": via,
                    "failures": row["unaudited"],
                    "consecutive": row["failures"],
                    "delay_s": delay,
                },
                trace_id=request_id,
            )
            execute(cur, "mark_auth_failures_audited", {"client_addr": client_addr})
            execute(cur, "delete_stale_auth_failures")
    return Failure(row["failures"], delay, bool(row["audit_due"]))


class Penalties:
    """The penalty waits of one process: at most `slots` sleep at once. `wait` sleeps out a
    failure's delay in a free slot, or, when every slot is taken (a flood of guesses),
    returns at once: a thread never queues behind a guess, so a valid token always finds
    one free. `sleep` is injected so tests see the delays without waiting them out."""

    def __init__(self, sleep: Callable[[float], None] = time.sleep, slots: int = PENALTY_SLOTS):
        self._sleep = sleep
        self._slots = threading.BoundedSemaphore(slots)

    def wait(self, delay_s: float) -> bool:
        """Sleep `delay_s` if a slot is free (True), else nothing (False)."""
        if not self._slots.acquire(blocking=False):
            return False
        try:
            self._sleep(delay_s)
        finally:
            self._slots.release()
        return True
