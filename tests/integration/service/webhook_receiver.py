"""What the webhook tests share: a real HTTP receiver on loopback (IPv4 or IPv6) that records
every POST (body bytes and headers) and answers with the statuses it is told, holds a request
until released, or trickles its answer a byte at a time; and `end_run`, which ends a run in
one transaction as the advancer does."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ddl import connect


@dataclass
class Received:
    body: bytes
    headers: dict[str, str]
    path: str
    arrived_at: float = field(default_factory=time.monotonic)
    hung_up_at: float | None = None  # of a trickled answer: when the sender hung up

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def signed_with(self, secret: str) -> bool:
        """True when `X-ETL-Signature` is the HMAC-SHA256 of the body with `secret`."""
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers.get("X-ETL-Signature", ""), expected)


@dataclass
class Receiver:
    """`statuses`: what the next requests are answered (then `default`); while `release` is
    clear a request waits (the test kills the sender meanwhile); the next `trickles`
    requests are answered a byte every `trickle_every_s` (a 200 that would take minutes),
    until the sender hangs up; `host` 127.0.0.1 or ::1; `port` 0: any free one."""

    host: str = "127.0.0.1"
    port: int = 0
    statuses: list[int] = field(default_factory=list)
    default: int = 200
    received: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Event = field(default_factory=threading.Event)
    trickles: int = 0
    trickle_every_s: float = 0.2

    def __post_init__(self) -> None:
        self.release.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                got = Received(body, dict(self.headers), self.path)
                receiver.received.append(got)
                receiver.arrived.set()
                if receiver.trickles > 0:
                    receiver.trickles -= 1
                    self.trickle(got)
                    return
                receiver.release.wait(60)
                status = receiver.statuses.pop(0) if receiver.statuses else receiver.default
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def trickle(self, got: Received) -> None:
                answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"z" * 3000 + b"\r\n\r\n"
                try:
                    for byte in answer:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(receiver.trickle_every_s)
                except OSError:  # the sender hung up: the next write failed
                    got.hung_up_at = time.monotonic()
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in self.host else socket.AF_INET

        self.server = Server((self.host, self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        where = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{where}:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def end_run(db_url: str, run_id: str, status: str) -> None:
    """End a queued run as the advancer does, in one transaction: it starts, its two steps
    end (7 + 5 records out, 2 rejected; `boom` when failed), then the run's status."""
    conn = connect(db_url, "etl-test")
    try:
        with conn, conn.cursor() as cur:
            cur.execute(
                """
                UPDATE runs SET status = 'running', started_at = now() WHERE id = %(r)s;
                INSERT INTO step_runs (run_id, name, type, position, status, records_out,
                                       rejected, error)
                VALUES (%(r)s, 'read', 'ingest', 0, %(s)s, 7, 2,
                        CASE WHEN %(s)s = 'failed' THEN 'boom' END),
                       (%(r)s, 'to_file', 'export', 1, %(s)s, 5, 0,
                        CASE WHEN %(s)s = 'failed' THEN 'boom' END);
                UPDATE runs SET status = %(s)s, finished_at = now() WHERE id = %(r)s;
                """,
                {"r": run_id, "s": status},
            )
    finally:
        conn.close()
