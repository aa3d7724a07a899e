"""The dramatiq-pg broker and the two wake-up messages.

Messages are wake-ups, the database is the truth: senders build messages by hand so they never
import actor modules, and a step message's id is derived from its attempt so a re-send by the
sweep re-queues the same message instead of adding a second one."""

from __future__ import annotations

import logging
import select
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import dramatiq
import dramatiq.errors
import psycopg2
from dramatiq.middleware import (
    AgeLimit,
    Callbacks,
    Pipelines,
    Retries,
    ShutdownNotifications,
    TimeLimit,
)
from dramatiq_pg.broker import PostgresBroker, PostgresConsumer
from dramatiq_pg.utils import make_pool
from psycopg2.extensions import quote_ident

from actors.errors import ListenSilent

COORDINATOR_QUEUE = "coordinator"
STEPS_QUEUE = "steps"
ADVANCE_RUN = "advance_run"
RUN_STEP = "run_step"
_STEP_NS = uuid.UUID("6d1f4f4e-2f7a-4c55-9b0e-5f0c1d9a7e21")
log = logging.getLogger("etl.broker")


class PromptConsumer(PostgresConsumer):
    """dramatiq-pg's consumer without two waits that cost up to ~2 s per step (the figures:
    bench/README.md, "Figures behind design choices"):

    - while its worker is busy it sleeps an exponential back-off capped at 1 s that is never
      reset, so a worker that just finished a step looks at its queue up to 1 s late; we
      poll every `busy_poll_s` instead (a sleep: nothing is read while busy);
    - its connection check reads pending notifications off the socket before `select()`,
      which then waits its whole timeout on an empty socket; we take those first.

    And it rides out a lost database session (a restart, a terminated backend) itself:
    dramatiq's consumer thread would log CRITICAL, drop this consumer and the messages it
    counts as in processing, and build a new one. We drop the dead sessions, warn once per
    outage, and look again after `reconnect_s`; the first look rescans the queue for what
    was sent meanwhile."""

    busy_poll_s = 0.02
    reconnect_s = 0.5
    _outage = False

    def __next__(self):
        try:
            if self._listen_conn is not None and len(self.in_processing) >= self.prefetch:
                time.sleep(self.busy_poll_s)
                return None
            message = super().__next__()
        except (dramatiq.errors.ConnectionError, psycopg2.Error) as exc:
            self._lost(exc)
            return None
        if self._outage:
            self._outage = False
            log.info("broker connection to queue %s is back", self.queue_name)
        return message

    def _lost(self, exc: BaseException) -> None:
        if not self._outage:
            log.warning("broker connection to queue %s lost: %s", self.queue_name, exc)
        self._outage = True
        for name in ("_listen_conn", "_consume_conn"):
            conn = getattr(self, name)
            setattr(self, name, None)
            if conn is not None:
                try:
                    self.pool.putconn(conn, close=True)
                except Exception:  # a pool that no longer knows it: nothing to give back
                    pass
        time.sleep(self.reconnect_s)

    def poll_for_notify(self):
        conn = self.get_listen_conn()
        if conn.notifies:
            self.notifies += conn.notifies[:]
            conn.notifies[:] = []
            return
        super().poll_for_notify()


class Broker(PostgresBroker):
    """The dramatiq-pg broker with `PromptConsumer`. Messages are sent through `pool`; the
    consumers take their sessions from `listen_pool`: they LISTEN, and dramatiq-pg holds an
    advisory lock per message in processing across transactions, so they need a session of
    their own (a direct or session-pooled URL, never a transaction pooler)."""

    def __init__(self, *, listen_pool=None, **kw):
        super().__init__(**kw)
        self.listen_pool = listen_pool or self.pool

    def consume(self, queue_name, prefetch=1, timeout=30000):
        return PromptConsumer(
            pool=self.listen_pool, queue_name=queue_name, prefetch=prefetch, timeout=timeout
        )


def _pool_url(url: str, max_connections: int, app: str) -> str:
    parts = urlsplit(url)
    params = (parts.query, f"maxconn={max_connections}", "minconn=0", f"application_name={app}")
    return urlunsplit(parts._replace(query="&".join(q for q in params if q)))


def build_broker(
    database_url: str,
    *,
    listen_url: str | None = None,
    max_connections: int = 8,
    app: str = "etl-broker",
) -> Broker:
    """A dramatiq-pg broker on `database_url` without the default middleware we replace:
    Retries capped at 0 (our attempts live in our tables), no Prometheus (port clashes); a TimeLimit
    stays as a backstop, actors set their own limits. Its sessions are named `app` in
    `pg_stat_activity`, like every other connection of the process. Its consumers connect to
    `listen_url` (default: `database_url`), which must keep a session (`check_listen`)."""
    middleware = [
        AgeLimit(),
        TimeLimit(),
        ShutdownNotifications(),
        Callbacks(),
        Pipelines(),
        Retries(max_retries=0),  # attempts and their delays live in our tables
    ]
    listen_pool = None
    if listen_url and listen_url != database_url:
        listen_pool = make_pool(_pool_url(listen_url, max_connections, f"{app}-listen"))
    return Broker(
        url=_pool_url(database_url, max_connections, app),
        listen_pool=listen_pool,
        results=False,
        middleware=middleware,
    )


def check_listen(url: str, *, wait_s: float = 2.0, app: str = "etl-listen-check") -> None:
    """`ListenSilent` unless a NOTIFY sent from one session of `url` reaches a LISTEN on
    another within `wait_s`. Behind a transaction pooler (PgBouncer `pool_mode =
    transaction`) the listening server session goes back to the pool after the LISTEN: it
    never hears anything, and nothing says so. A database that cannot be reached is not
    checked (a warning): the process starts and waits for it, as it always did."""
    channel = f"etl.listen_check.{uuid.uuid4().hex}"
    try:
        listener = psycopg2.connect(url, application_name=app, connect_timeout=10)
    except psycopg2.OperationalError as exc:  # the database away: the process waits for it
        log.warning("LISTEN not checked, %s is not reachable: %s", _without_password(url), exc)
        return
    try:
        listener.autocommit = True
        with listener.cursor() as cur:
            cur.execute(f"LISTEN {quote_ident(channel, listener)}")
        sender = psycopg2.connect(url, application_name=app, connect_timeout=10)
        try:
            sender.autocommit = True
            with sender.cursor() as cur:
                cur.execute("SELECT pg_notify(%s, '')", (channel,))
        finally:
            sender.close()
        deadline = time.monotonic() + wait_s
        while not any(n.channel == channel for n in listener.notifies):
            left = deadline - time.monotonic()
            if left <= 0:
                raise ListenSilent(
                    f"LISTEN on {_without_password(url)} hears nothing: a transaction pooler"
                    " (PgBouncer pool_mode = transaction) between us and PostgreSQL? Set"
                    " ETL_LISTEN_URL to a direct or session-pooled URL of the same database"
                )
            select.select([listener], [], [], left)
            listener.poll()
    finally:
        listener.close()


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))


def step_message_id(attempt_id: int) -> str:
    """The deterministic message id of an attempt's `run_step` wake-up."""
    return str(uuid.uuid5(_STEP_NS, str(attempt_id)))


def send_advance_run(
    broker: dramatiq.Broker, run_id: str, trace_id: str, *, delay_ms: int | None = None
) -> None:
    """Ask the dag-advancer to look at `run_id` (now, or after `delay_ms`)."""
    message = dramatiq.Message(
        queue_name=COORDINATOR_QUEUE,
        actor_name=ADVANCE_RUN,
        args=(str(run_id),),
        kwargs={"trace_id": trace_id},
        options={},
    )
    broker.enqueue(message, delay=delay_ms)


def send_run_step(broker: dramatiq.Broker, attempt_id: int, trace_id: str) -> None:
    """Wake an executor for attempt `attempt_id`; re-sending re-queues the same message."""
    message = dramatiq.Message(
        queue_name=STEPS_QUEUE,
        actor_name=RUN_STEP,
        args=(int(attempt_id),),
        kwargs={"trace_id": trace_id},
        options={},
        message_id=step_message_id(attempt_id),
    )
    broker.enqueue(message)
