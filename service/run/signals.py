"""What every long-running process of the platform does about signals and parents: SIGTERM
and SIGINT set a stop event (the process winds down at its next boundary), and a child
asks the kernel to be stopped when its parent dies. And before a process consumes wake-ups,
whether LISTEN works on its URL at all."""

from __future__ import annotations

import ctypes
import logging
import signal
import threading

from actors import ListenSilent, check_listen

log = logging.getLogger("etl.process")


def die_with_parent() -> None:
    """In the API child, before exec: ask the kernel to SIGTERM it when the coordinator dies
    (even by SIGKILL), so a restarted coordinator never finds an orphan on its port."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_on_signals() -> threading.Event:
    """An event set by the first SIGTERM or SIGINT (the handlers replace the defaults)."""
    stop = threading.Event()

    def handler(signum, _frame) -> None:
        log.info("signal %s received, stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def listen_heard(url: str, who: str, *, app: str) -> bool:
    """Whether LISTEN on `url` hears a NOTIFY (`actors.check_listen`, sessions named `app`);
    if not, the error is logged: `who` must not start, its wake-ups would never come."""
    try:
        check_listen(url, app=app)
    except ListenSilent as exc:
        log.error("%s refuses to start: %s", who, exc)
        return False
    return True
