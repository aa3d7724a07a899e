"""The notifier: delivers the webhook outbox (`webhook_deliveries`) of the coordinator.

Each worker thread claims the oldest due delivery with `FOR UPDATE SKIP LOCKED` and holds
that row lock while it POSTs: a coordinator killed mid-delivery loses its session, hence
the lock, and the next coordinator's claim takes the row at once and sends it again with
the same `event_id` and the same bytes (at least once; receivers drop repeats by
`event_id`). A delivery is marked delivered only after a 2xx answer; anything else (no
connection, a timeout, a 3xx, 4xx or 5xx) is retried after an exponential delay with
jitter, capped, until `max_attempts`, when it is given up (status `failed`, an audit row
and a log line). An attempt cut short by a crash is not counted. Every attempt has a
wall-clock limit (`timeout_s`, well under the session's idle limit), so no claim outlives
its lock while a receiver trickles its answer.

The body is built and stored in a transaction of its own before the first attempt. The
outbox trigger sends `NOTIFY etl_webhooks` when it queues deliveries; the notifier LISTENs,
so a delivery leaves within milliseconds of the run's COMMIT, and it also polls every
`poll_s` for retries coming due. Run it only in the coordinator process (`etl coordinator`)."""

from __future__ import annotations

import http.client
import logging
import random
import select
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.extensions

from connectors import MAX_HTTP_ANSWER_BYTES  # of a receiver's answer read before closing
from ddl import Cursor, KeptSession, connector
from service.config import Config
from service.domain.webhooks import (
    SIGNATURE_HEADER,
    cancel_delivery,
    claim_due_delivery,
    delivery_body,
    purge_finished_deliveries,
    record_attempt_failed,
    record_delivered,
    signature,
    store_delivery_body,
)

log = logging.getLogger("etl.notifier")

CHANNEL = "etl_webhooks"
USER_AGENT = "etl-platform-webhooks/1"
LISTEN_WAIT_S = 1.0  # the listener looks up from its socket this often (stop, purge)

Connect = Callable[[], psycopg2.extensions.connection]


CONNECTION_FAILED = "connection failed"  # what the API shows of an attempt without an answer


class DeliveryFailed(Exception):
    """An attempt that got no 2xx. Its message is what `last_error` shows: `HTTP <status>`
    when the receiver answered (`status_code`), else `connection failed`, whatever the reason
    (refused, timed out, a name not found, TLS): the reason would tell an admin which ports
    of which hosts are open. `detail` keeps it for the server log."""

    def __init__(self, message: str, status_code: int | None = None, detail: str | None = None):
        super().__init__(message)
        self.status_code = status_code
        self.detail = detail or message


def post_webhook(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> int:
    """POST `body` to `url` with `headers` (sent with their names as given); the 2xx
    status, else `DeliveryFailed` saying why. Straight to the URL's host (no proxy from the
    environment), certificates verified for https, a 3xx not followed (it is not a
    delivery). `timeout_s` limits the whole attempt by the wall clock: the name lookup, the
    connection, TLS, sending and the answer. Past it the attempt fails ("timed out after N
    s") even while a receiver trickles its answer byte by byte, so the delivery's claim is
    released long before the session's idle limit and no other claim sends it meanwhile."""
    attempt = _Attempt(url, body, headers, timeout_s)
    sender = threading.Thread(target=attempt.run, name="notifier-post", daemon=True)
    sender.start()
    sender.join(timeout_s)
    if sender.is_alive():
        attempt.expire()
    return attempt.outcome()


class _Attempt:
    """One POST, run by a thread of its own so that its caller waits no longer than the
    deadline whatever blocks (a name lookup cannot be interrupted). `expire()` shuts the
    connection's socket down, which ends a read or a write under way at once, and forbids a
    connection still being made to send anything."""

    def __init__(self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float):
        self.url, self.body, self.headers, self.timeout_s = url, body, dict(headers), timeout_s
        self._lock = threading.Lock()
        self._expired = False
        self._handle: socket.socket | None = None  # a duplicate of the connection's socket
        self._status: int | None = None
        self._reason = ""
        self._error: str | None = None

    def run(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        https = parts.scheme == "https"
        kind = http.client.HTTPSConnection if https else http.client.HTTPConnection
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            # the port always given: http.client would read "[::1]"'s last group as one
            port = parts.port or (443 if https else 80)
            conn = kind(parts.hostname or "", port, timeout=self.timeout_s)
            conn._create_connection = self._connect  # its hook for opening the socket
            try:
                conn.request("POST", target, body=self.body, headers=self.headers)
                answer = conn.getresponse()
                answer.read(MAX_HTTP_ANSWER_BYTES)
                with self._lock:  # an answer cut off by `expire()` ends early: never a 2xx
                    if not self._expired:
                        self._status, self._reason = answer.status, answer.reason
            finally:
                conn.close()
        except (OSError, ValueError, http.client.HTTPException) as exc:  # refused, TLS, ...
            self._error = f"{type(exc).__name__}: {exc}"
        finally:
            with self._lock:
                if self._handle is not None:
                    self._handle.close()
                    self._handle = None

    def _connect(self, address: tuple, timeout: float, source_address: Any = None) -> socket.socket:
        """`socket.create_connection`, registering a duplicate of the socket (TLS takes the
        original over) for `expire()`; a connection made after the deadline is dropped."""
        sock = socket.create_connection(address, timeout, source_address)
        with self._lock:
            if self._expired:
                sock.close()
                raise TimeoutError("connected after the deadline")
            self._handle = sock.dup()
        return sock

    def expire(self) -> None:
        with self._lock:
            self._expired = True
            if self._handle is not None:
                try:
                    self._handle.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed by the receiver

    def outcome(self) -> int:
        """The 2xx status, else `DeliveryFailed`; after `expire()`, a timeout unless the
        answer had been read in full before it."""
        with self._lock:
            expired, status = self._expired, self._status
        if status is None:
            why = f"timed out after {self.timeout_s:g} s" if expired else self._error
            raise DeliveryFailed(CONNECTION_FAILED, detail=why or "no answer")
        if not 200 <= status < 300:
            raise DeliveryFailed(f"HTTP {status} {self._reason}".strip(), status)
        return status


@dataclass(frozen=True)
class Backoff:
    """The delay before attempt n+1 after n failed ones: `base_s * 2**(n-1)`, capped at
    `max_s`, times a jitter factor drawn from 0.8..1.2 (retries of many deliveries to one
    receiver spread out instead of arriving together)."""

    base_s: float = 1.0
    max_s: float = 3600.0

    def delay_s(self, failed_attempts: int, rng: Callable[[], float] = random.random) -> float:
        exponent = min(max(failed_attempts - 1, 0), 60)
        return min(self.max_s, self.base_s * 2**exponent) * (0.8 + 0.4 * rng())


class Notifier:
    """Worker threads delivering due webhook deliveries, woken by NOTIFY or every `poll_s`.

    `connect()` opens a new psycopg2 connection (each thread owns one); `post(url, body,
    headers, timeout_s)` sends an attempt (`post_webhook`; tests may pass another);
    `public_url` is the console's base for the bodies' `console_url`. With `retention_s`,
    deliveries that ended longer ago than that are purged every `purge_every_s`.
    `listening` is set while NOTIFY wakes it (LISTEN done), cleared while the listener is
    reconnecting."""

    def __init__(
        self,
        connect: Connect,
        *,
        public_url: str,
        timeout_s: float = 5.0,
        max_attempts: int = 20,
        backoff: Backoff = Backoff(),
        post: Callable[[str, bytes, Mapping[str, str], float], int] = post_webhook,
        rng: Callable[[], float] = random.random,
        threads: int = 2,
        poll_s: float = 1.0,
        retention_s: float | None = None,
        purge_every_s: float = 300.0,
        listen_connect: Connect | None = None,
    ):
        self._connect = connect
        self._listen_connect = listen_connect or connect  # LISTEN needs a session of its own
        self.public_url = public_url
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.backoff = backoff
        self._post = post
        self._rng = rng
        self.poll_s = poll_s
        self.retention_s = retention_s
        self.purge_every_s = purge_every_s
        self._threads = threads
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._wakeups = 0  # counts wake-ups, so one arriving mid-claim is not lost
        self.listening = threading.Event()  # set while the listener's LISTEN is in force
        self._workers: list[threading.Thread] = []

    # --- lifecycle ---
    def start(self) -> None:
        """Start the listener and the workers; a database that is down is retried."""
        names = ["listen"] + [f"deliver-{i + 1}" for i in range(self._threads)]
        targets = [self._listen] + [self._work] * self._threads
        for name, target in zip(names, targets, strict=True):
            thread = threading.Thread(target=target, name=f"notifier-{name}", daemon=True)
            thread.start()
            self._workers.append(thread)
        log.info("notifier started: %d delivery threads", self._threads)

    def shutdown(self) -> None:
        """Stop; a POST under way finishes (at most `timeout_s`) and is recorded."""
        self._stop.set()
        self._notify()
        for thread in self._workers:
            thread.join(timeout=self.timeout_s + LISTEN_WAIT_S + 5)
        log.info("notifier stopped")

    def _notify(self) -> None:
        with self._wake:
            self._wakeups += 1
            self._wake.notify_all()

    # --- threads ---
    def _listen(self) -> None:
        """LISTEN for the outbox trigger's NOTIFY and wake the workers; purge now and then."""
        session = KeptSession(self._open_listener)
        purged_at = time.monotonic() - self.purge_every_s  # purge once at start
        while not self._stop.is_set():
            try:
                conn = session.connection()
                ready, _, _ = select.select([conn], [], [], LISTEN_WAIT_S)
                if ready:
                    conn.poll()
                    if conn.notifies:
                        conn.notifies.clear()
                        self._notify()
                if self.retention_s is not None and (
                    time.monotonic() - purged_at >= self.purge_every_s
                ):
                    purged_at = time.monotonic()
                    with conn.cursor() as cur:
                        gone = purge_finished_deliveries(cur, self.retention_s)
                    if gone:
                        log.info("notifier: purged %d finished webhook deliveries", gone)
            except (psycopg2.Error, OSError) as exc:
                log.warning("notifier: listening failed: %s", str(exc).strip())
                self.listening.clear()
                session.close()
                self._stop.wait(self.poll_s)
        self.listening.clear()
        session.close()

    def _open_listener(self) -> psycopg2.extensions.connection:
        """A new session LISTENing on the channel; the workers are woken for what was queued
        while nobody listened."""
        conn = self._listen_connect()
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            conn.close()
            raise
        self.listening.set()
        self._notify()
        return conn

    def _work(self) -> None:
        """Deliver while something is due; otherwise wait for a wake-up or `poll_s`."""
        session = KeptSession(self._connect)
        while not self._stop.is_set():
            with self._wake:
                seen = self._wakeups
            try:
                if self.deliver_one(session):
                    continue
            except (psycopg2.Error, OSError) as exc:
                log.warning("notifier: delivering failed: %s", str(exc).strip())
                session.close()
            except Exception:
                log.exception("notifier: delivering failed")
                session.close()
            with self._wake:
                if not self._stop.is_set() and self._wakeups == seen:
                    self._wake.wait(self.poll_s)
        session.close()

    # --- one delivery ---
    def deliver_one(self, session: KeptSession) -> bool:
        """Claim the oldest due delivery and make one attempt of it (storing its body
        first if it has none) in one transaction of `session`; False when nothing was due."""
        with session.transaction() as cur:
            delivery = claim_due_delivery(cur)
            if delivery is None:
                return False
            if delivery["webhook_deleted"]:
                cancel_delivery(cur, delivery["id"])
                return True
            if delivery["body"] is None:
                body = delivery_body(delivery, self.public_url)
                store_delivery_body(cur, delivery["id"], body)
                return True  # committed before any attempt; the next claim sends it
            self._attempt(cur, delivery)
        return True

    def _attempt(self, cur: Cursor, delivery: Mapping[str, Any]) -> None:
        """POST the stored body, holding the row lock, and record the outcome."""
        body = delivery["body"].encode("utf-8")
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            SIGNATURE_HEADER: signature(body, delivery["secret"]),
            "X-ETL-Event": delivery["event"],
            "X-ETL-Event-Id": str(delivery["event_id"]),
        }
        what = f"{delivery['event']} {delivery['event_id']}"
        context = {
            "run_id": str(delivery["run_id"]),
            "trace_id": delivery["run"].get("trace_id"),
            "pipeline_id": str(delivery["pipeline_id"]),
            "attempt": delivery["attempts"] + 1,
        }
        try:
            status = self._post(delivery["url"], body, headers, self.timeout_s)
        except DeliveryFailed as exc:
            failed = delivery["attempts"] + 1
            give_up = failed >= self.max_attempts
            delay = self.backoff.delay_s(failed, self._rng)
            record_attempt_failed(
                cur,
                delivery,
                status_code=exc.status_code,
                error=str(exc),
                delay_s=delay,
                give_up=give_up,
            )
            why = exc.detail  # the reason in full: the server log only
            if give_up:
                log.warning("webhook %s given up: %s", what, why, extra=context)
            else:
                log.info("webhook %s failed (%s); retry in %.1f s", what, why, delay, extra=context)
            return
        record_delivered(cur, delivery["id"], status)
        log.info("webhook %s delivered (HTTP %s)", what, status, extra=context)


def build_notifier(cfg: Config) -> Notifier:
    """The coordinator's notifier on `cfg.database_url` (started by `run_coordinator`). A
    session idle in its transaction past the POST timeout (a frozen process) is ended by the
    server, releasing its claim."""
    idle_s = cfg.webhook_timeout_s + 30
    return Notifier(
        connector(cfg.database_url, "etl-notifier", idle_in_transaction_timeout_s=idle_s),
        public_url=cfg.public_url,
        timeout_s=cfg.webhook_timeout_s,
        max_attempts=cfg.webhook_max_attempts,
        backoff=Backoff(cfg.webhook_backoff_s, cfg.webhook_backoff_max_s),
        retention_s=cfg.retention_days * 86400,
        listen_connect=connector(cfg.listen_url, "etl-notifier-listen"),
    )
