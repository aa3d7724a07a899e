"""How many wrong bearer tokens a real API answers per second, and how long the real admin
waits meanwhile (issue 22, item 4): `etl api` (gunicorn, 2 workers) on a fresh database,
`--clients` threads sending `GET /api/v1/pipelines` with wrong tokens for `--seconds`, one
more thread sending the admin's token once every 0.2 s. A figure to report, not a test.

    .venv/bin/python -m bench.auth_guesses                      # this tree
    .venv/bin/python -m bench.auth_guesses --source /tmp/old    # another tree (e.g. `git
                                                                # archive main | tar -x`)

The tree given serves the API (its `service` and its migrations), with this virtualenv."""

from __future__ import annotations

import argparse
import http.client
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psycopg2

from drills import free_port

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("ETL_TEST_PG", "postgresql://postgres@127.0.0.1:5432")
ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"


def _admin_sql(statement: str) -> None:
    conn = psycopg2.connect(f"{PG}/postgres")
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(statement)
    conn.close()


def _get(port: int, token: str) -> tuple[int, float]:
    """(status, seconds) of one GET on a new connection, as a guessing client makes it."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/api/v1/pipelines", headers={"Authorization": f"Bearer {token}"})
        status = conn.getresponse().status
    finally:
        conn.close()
    return status, time.perf_counter() - started


def measure(source: Path, seconds: float, clients: int) -> dict[str, float]:
    """Guesses answered per second and the admin's median/max latency under the guessing."""
    name = f"etl_bench_auth_{uuid.uuid4().hex[:8]}"
    url = f"{PG}/{name}"
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(source),
        "ETL_DATABASE_URL": url,
        "ETL_SANDBOX_URL": url,
        "ETL_ADMIN_TOKEN": ADMIN_TOKEN,
        "ETL_API_BIND": f"127.0.0.1:{port}",
        "ETL_API_WORKERS": "2",
        "ETL_LOG_LEVEL": "WARNING",
    }
    etl = [sys.executable, "-m", "service"]
    for step in ("migrate", "seed"):
        subprocess.run([*etl, step], env=env, cwd=source, check=True, capture_output=True)
    server = subprocess.Popen(
        [*etl, "api"], env=env, cwd=source, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(300):
            try:
                if _get(port, ADMIN_TOKEN)[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        stop = time.monotonic() + seconds
        guesses: list[int] = []
        admin: list[float] = []

        def guess() -> None:
            while time.monotonic() < stop:
                status, _ = _get(port, secrets.token_urlsafe(32))
                guesses.append(status)

        def use() -> None:
            while time.monotonic() < stop:
                status, took = _get(port, ADMIN_TOKEN)
                assert status == 200, status
                admin.append(took)
                time.sleep(0.2)

        threads = [threading.Thread(target=guess) for _ in range(clients)]
        threads.append(threading.Thread(target=use))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(guesses) <= {401}, set(guesses)
        return {
            "guesses_per_s": len(guesses) / seconds,
            "admin_median_ms": statistics.median(admin) * 1000,
            "admin_max_ms": max(admin) * 1000,
        }
    finally:
        server.terminate()
        server.wait(30)
        _admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT, help="the tree serving the API")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=4, help="guessing threads")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    figures = measure(args.source.resolve(), args.seconds, args.clients)
    print(
        f"{args.source}: {figures['guesses_per_s']:.1f} wrong tokens answered per second"
        f" ({args.clients} clients, {args.seconds:g} s); the admin's calls meanwhile:"
        f" median {figures['admin_median_ms']:.0f} ms, max {figures['admin_max_ms']:.0f} ms"
        f" (load average {load:.1f} -> {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
