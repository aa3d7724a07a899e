"""What the webhook tests share: a real HTTP receiver on loopback that records every POST
(body bytes and headers) and answers with the statuses it is told, or holds a request until
released; and `end_run`, which ends a run in one transaction as the advancer does."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ddl import connect


@dataclass
class Received:
    body: bytes
    headers: dict[str, str]
    path: str

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
    clear a request waits (the test kills the sender meanwhile); `port` 0: any free one."""

    port: int = 0
    statuses: list[int] = field(default_factory=list)
    default: int = 200
    received: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.release.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                receiver.received.append(Received(body, dict(self.headers), self.path))
                receiver.arrived.set()
                receiver.release.wait(60)
                status = receiver.statuses.pop(0) if receiver.statuses else receiver.default
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
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
