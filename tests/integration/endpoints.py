"""An HTTP endpoint on 127.0.0.1 that answers every POST hostilely: a 1 GiB body generated
as it is sent (never stored), or a body dripped a byte at a time. It keeps what it was sent
(path, body) and how many bytes of each answer a client took before it hung up."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GIB = 1 << 30
_CHUNK = b"x" * (1 << 20)


class HostileEndpoint:
    """`answer` is "huge" (`GIB` bytes, Content-Length given) or "drip" (one byte a second,
    for ever). `posts`: (path, body); `sent`: bytes of answer body written, per answer that
    ended (the client closed, or all of it went)."""

    def __init__(self, answer: str = "huge") -> None:
        self.posts: list[tuple[str, bytes]] = []
        self.sent: list[int] = []
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with endpoint.lock:
                    endpoint.posts.append((self.path, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(GIB))
                self.end_headers()
                endpoint.answered(endpoint.write(self.wfile, answer))
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def write(out: Any, answer: str) -> int:
        sent = 0
        try:
            while sent < GIB:
                chunk = _CHUNK if answer == "huge" else b"x"
                out.write(chunk)
                out.flush()
                sent += len(chunk)
                if answer == "drip":
                    time.sleep(1)
        except OSError:  # the client hung up
            pass
        return sent

    def answered(self, sent: int) -> None:
        with self.lock:
            self.sent.append(sent)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
