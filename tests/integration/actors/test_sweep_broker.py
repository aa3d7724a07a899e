"""The coordinator's sweep keeps the broker's table bounded: over 1,000 runs' worth of
wake-ups sent through the real dramatiq-pg broker and finished as a consumer finishes them,
the sweep loop purges the finished messages and never a queued one."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

from actors import SweepSettings, build_broker, run_sweep, send_advance_run
from ddl import connector
from drills import run_sql, wait_until

RUNS = 1_000
WAVE = 50  # runs whose wake-ups are sent and finished together


def test_the_sweep_keeps_the_broker_table_bounded_over_a_thousand_runs(
    db_url: str, tmp_path: Path
) -> None:
    broker = build_broker(db_url, max_connections=2)
    settings = SweepSettings(
        every_s=0.05,
        retention_s=7 * 86400,
        export_dir=tmp_path / "exports",
        reject_dir=tmp_path / "rejects",
        purge_every_s=0.0,  # every pass purges: the test stands for hours of operation
        broker_retention_s=0.0,
    )
    stop = threading.Event()
    sweep = threading.Thread(
        target=run_sweep,
        args=(connector(db_url, "test-sweep"), connector(db_url, "test-sandbox"), broker),
        kwargs={"settings": settings, "stop": stop},
        daemon=True,
    )
    sweep.start()
    peak = 0
    try:
        for _ in range(RUNS // WAVE):
            for _ in range(WAVE):
                send_advance_run(broker, str(uuid.uuid4()), uuid.uuid4().hex)
            # What a consumer does with a message it has processed.
            run_sql(db_url, "UPDATE dramatiq.queue SET state = 'done' WHERE state = 'queued'")
            peak = max(peak, run_sql(db_url, "SELECT count(*) FROM dramatiq.queue")[0][0])
        # One message that is still queued must survive every pass.
        send_advance_run(broker, "still-queued", "trace")
        sent = run_sql(db_url, "SELECT count(*) FROM dramatiq.queue")[0][0]
        assert sent <= RUNS // 2, f"{sent} broker rows after {RUNS} runs: the sweep purges nothing"

        def only_the_queued_one_left() -> bool:
            rows = run_sql(db_url, "SELECT state::text, message->'args'->>0 FROM dramatiq.queue")
            return rows == [("queued", "still-queued")]

        wait_until(only_the_queued_one_left, timeout=30, what="finished messages purged")
    finally:
        stop.set()
        sweep.join(10)
        broker.close()
    print(f"\nbroker rows: peak {peak} while {RUNS} runs' wake-ups were sent and finished")
    assert peak <= RUNS // 2
