"""The API behind the real gunicorn command of `etl api` (the `server` fixture): chunked
request bodies are read, not dropped, and clients trickling their headers do not delay
anyone else. Loopback only; every loop is bounded."""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
import urllib.parse
from typing import Any

from service.domain.principals import ADMIN
from tests.integration.testapp import TOKENS, plan_copy
from tests.integration.testapp import request_json as _request

SLOW_CLIENTS = 50
HOLD_S = 30.0
MAX_DELAY_S = 0.100


def _raw_http(base: str, head: str, body_parts: list[bytes] = ()) -> tuple[int, Any]:
    """Send a raw HTTP/1.1 request (head without the blank line) and read the answer."""
    url = urllib.parse.urlsplit(base)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(head.encode() + b"\r\n")
        for part in body_parts:
            sock.sendall(part)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < _expected_size(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    _, _, body = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), json.loads(body or b"null")


def _expected_size(data: bytes) -> int:
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(head) + 4 + int(value)
    return len(data)


def _chunked(payload: bytes, size: int) -> list[bytes]:
    parts = [payload[i : i + size] for i in range(0, len(payload), size)]
    return [b"%x\r\n%s\r\n" % (len(p), p) for p in parts] + [b"0\r\n\r\n"]


def _post_chunked(base: str, path: str, payload: bytes, size: int = 7) -> tuple[int, Any]:
    url = urllib.parse.urlsplit(base)
    head = (
        f"POST {url.path}{path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Authorization: Bearer {TOKENS[ADMIN]}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n"
    )
    return _raw_http(base, head, _chunked(payload, size))


def test_a_chunked_trigger_key_is_honoured(server: str) -> None:
    # Regression: a chunked body was read as empty, so every retry created a new run.
    status, pipeline = _request(server, "POST", "/pipelines", {"name": "c", "plan": plan_copy()})
    assert status == 201
    path = f"/pipelines/{pipeline['id']}/runs"
    first = _post_chunked(server, path, b'{"trigger_key": "nightly-2026-12-01"}')
    again = _post_chunked(server, path, b'{"trigger_key": "nightly-2026-12-01"}', size=3)
    assert first[0] == 201 and first[1]["trigger_key"] == "nightly-2026-12-01"
    assert again[0] == 200 and again[1]["id"] == first[1]["id"]
    # A chunked body is held to the same 1 MiB as any other, and judged like any other.
    huge = json.dumps({"name": "h", "plan": {"x": "y" * (1024 * 1024)}}).encode()
    status, body = _post_chunked(server, "/pipelines", huge, size=64 * 1024)
    assert (status, body["error"]["code"]) == (413, "payload_too_large")
    status, body = _post_chunked(server, "/pipelines", b'{"name": ')
    assert (status, body["error"]["code"]) == (400, "malformed_json")
    status, body = _post_chunked(
        server, "/pipelines", json.dumps({"name": "d", "plan": plan_copy()}).encode()
    )
    assert status == 201 and body["name"] == "d"


def _timed(call) -> float:
    started = time.perf_counter()
    status, _ = call()
    elapsed = time.perf_counter() - started
    assert status in (200, 201)
    return elapsed


def test_fifty_slow_header_clients_do_not_delay_health_or_a_trigger(server: str) -> None:
    # Regression: two clients sending headers slowly blocked both sync workers; /health did
    # not answer for about 32 s.
    status, pipeline = _request(server, "POST", "/pipelines", {"name": "s", "plan": plan_copy()})
    assert status == 201
    trigger_path = f"/pipelines/{pipeline['id']}/runs"
    root = server.removesuffix("/api/v1")

    def health() -> tuple[int, Any]:
        return _request(root, "GET", "/health")

    def trigger() -> tuple[int, Any]:
        # The same key: after the first, each answer is the existing run (admission is the
        # whole path: lock, lookup, answer), so the queue limit never turns it into a 429.
        return _request(server, "POST", trigger_path, {"trigger_key": "slow-clients"})

    baseline_health = [_timed(health) for _ in range(10)]
    baseline_trigger = [_timed(trigger) for _ in range(10)]

    stop = threading.Event()
    held: list[int] = []
    slow = threading.Thread(target=_trickle, args=(server, stop, held), daemon=True)
    slow.start()
    deadline = time.monotonic() + 10
    while not held and time.monotonic() < deadline:
        time.sleep(0.05)
    assert held == [SLOW_CLIENTS]
    loaded_health: list[float] = []
    loaded_trigger: list[float] = []
    end = time.monotonic() + HOLD_S
    while time.monotonic() < end:
        loaded_health.append(_timed(health))
        loaded_trigger.append(_timed(trigger))
        time.sleep(0.25)
    stop.set()
    slow.join(10)

    _check_delays("/health", loaded_health, baseline_health)
    _check_delays("trigger", loaded_trigger, baseline_trigger)


def _trickle(server: str, stop: threading.Event, held: list[int]) -> None:
    """SLOW_CLIENTS clients that sent a request line and then one header byte per second,
    until `stop`; `held` gets their count once they are all connected."""
    url = urllib.parse.urlsplit(server)
    socks = []
    for _ in range(SLOW_CLIENTS):
        s = socket.create_connection((url.hostname, url.port), timeout=5)
        s.sendall(f"GET /health HTTP/1.1\r\nHost: {url.netloc}\r\nX-Slow: ".encode())
        socks.append(s)
    held.append(len(socks))
    while not stop.wait(1.0):
        for s in socks:
            s.sendall(b"z")
    for s in socks:
        s.close()


def _check_delays(name: str, loaded: list[float], baseline: list[float]) -> None:
    """The delays of `loaded` calls over the baseline's median, printed; the bound of the
    issue holds on their 90th percentile (one scheduling hiccup of this shared test machine
    cannot fail it) and no call comes near the old 32 s."""
    d = sorted(t - statistics.median(baseline) for t in loaded)
    p90 = d[int(len(d) * 0.9)]
    print(
        f"\n{name} under {SLOW_CLIENTS} slow-header clients for {HOLD_S:g} s:"
        f" {len(d)} calls, baseline median {statistics.median(baseline) * 1000:.1f} ms,"
        f" delay median {statistics.median(d) * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms,"
        f" max {d[-1] * 1000:.1f} ms"
    )
    assert p90 <= MAX_DELAY_S, (name, d)
    assert d[-1] < 1.0, (name, d)
