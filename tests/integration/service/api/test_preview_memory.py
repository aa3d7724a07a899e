"""A preview of the largest input an ingest may read (one 49.9 MiB value, `records: 5000`, a
30-step chain) from outside, on a real one-worker gunicorn: the answer shows the value cut
to 200 characters with its length, the worker's peak RSS of each request stays within
200 MiB of its idle RSS, and the worker gives the memory back once it has answered (the
next request starts where the first one did). CSV (quoted, across lines, and unquoted),
JSON Lines and a JSON array, as each has its own reader."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from drills import ApiClient, free_port
from drills.memory import child_pids, reset_peak, status_mib
from service.config import Config
from service.domain.principals import ADMIN
from service.run.gunicorn import gunicorn_argv
from tests.integration.testapp import TOKENS, seed_principals

CHARS = 50 * 2**20 - 100 * 1024  # of the long value: 49.9 MiB
STEPS = 30
PEAK_ABOVE_IDLE_MIB = 200  # the target, per request
KEPT_MIB = 24  # what a worker may keep of a request once it has answered
QUOTED_HEAD = 'he said "hi"\n'


def write_inputs(data: Path) -> dict[str, tuple[str, str]]:
    """Files with one record whose value `a` is `CHARS` long, `b` after it; each file's
    name and format by case, and the value's first characters."""
    long = "x" * CHARS
    (data / "quoted.csv").write_text(
        f'id,a,b\n1,"{QUOTED_HEAD.replace(chr(34), 2 * chr(34))}{long[len(QUOTED_HEAD) :]}",tail\n'
    )
    (data / "bare.csv").write_text(f"id,a,b\n1,{long},tail\n")
    (data / "big.jsonl").write_text(json.dumps({"id": 1, "a": long, "b": "tail"}) + "\n")
    (data / "big.json").write_text(json.dumps([{"id": 1, "a": long, "b": "tail"}]))
    return {
        "csv, quoted across two lines": ("quoted.csv", "csv"),
        "csv, unquoted": ("bare.csv", "csv"),
        "jsonl": ("big.jsonl", "jsonl"),
        "json": ("big.json", "json"),
    }


def chain(path: str, fmt: str) -> dict:
    """An ingest of `path` and 29 trims of the long value, one after the other."""
    steps = [{"name": "read", "type": "ingest",
              "config": {"source": "file", "path": path, "format": fmt}}]  # fmt: skip
    for i in range(STEPS - 1):
        steps.append(
            {"name": f"t{i}", "type": "transform", "depends_on": [steps[-1]["name"]],
             "config": {"op": "trim", "columns": ["a"]}}
        )  # fmt: skip
    return {"steps": steps}


@pytest.fixture
def one_worker(db_url: str, tmp_path: Path) -> Iterator[tuple[ApiClient, int, Path]]:
    """`etl api`'s gunicorn command with one worker; a client, the worker's pid and the
    data directory."""
    seed_principals(db_url)
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    cfg = Config(database_url=db_url, api_bind=f"127.0.0.1:{port}", api_workers=1)
    env = {**os.environ, "ETL_DATABASE_URL": db_url, "ETL_LOG_LEVEL": "WARNING",
           "ETL_DATA_DIR": str(data), "ETL_EXPORT_DIR": str(tmp_path / "exports")}  # fmt: skip
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(gunicorn_argv(cfg), env=env, stdout=out, stderr=out)
    client = ApiClient(f"http://127.0.0.1:{port}", TOKENS[ADMIN], timeout_s=120)

    def alive() -> None:
        if proc.poll() is not None:
            pytest.fail(f"gunicorn did not start: {log.read_text()[-3000:]}")

    try:
        client.wait_healthy(timeout=30, alive=alive)
        (worker,) = child_pids(proc.pid)
        yield client, worker, data
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def _preview(client: ApiClient, worker: int, plan: dict) -> tuple[dict, float, float]:
    """The answer, and the worker's peak RSS during the request above its RSS before it and
    its RSS after it. A preview past its time limit (a busy machine) is asked again."""
    for _ in range(3):
        before, _ = status_mib(worker)
        reset_peak(worker)
        status, body = client.call("POST", "/pipelines/preview", {"plan": plan, "records": 5000})
        after, peak = status_mib(worker)
        assert status == 200, body
        if not _timed_out(body):
            break
    return body, peak - before, after


def _timed_out(answer: dict) -> bool:
    return any("preview time limit" in (s["error"] or "") for s in answer["steps"])


def test_a_preview_of_the_largest_value_is_bounded_and_gives_its_memory_back(
    one_worker: tuple[ApiClient, int, Path],
) -> None:
    client, worker, data = one_worker
    cases = write_inputs(data)
    (data / "small.csv").write_text("id,a,b\n1,x,y\n")
    _preview(client, worker, chain("small.csv", "csv"))  # the worker's first preview
    idle, _ = status_mib(worker)
    figures = {}
    for label, (path, fmt) in cases.items():
        for run in range(2):
            answer, peak, after = _preview(client, worker, chain(path, fmt))
            figures[f"{label} #{run + 1}"] = f"peak +{peak:.0f} MiB, after {after - idle:+.0f} MiB"
            assert peak < PEAK_ABOVE_IDLE_MIB and after - idle < KEPT_MIB, figures
            # A busy machine may still stop a preview at its time limit (asked 3 times): the
            # steps that ran are checked, and the value must at least have been read.
            assert answer["ok"] or _timed_out(answer), answer["steps"]
            assert answer["steps"][0]["status"] == "ok", answer["steps"][0]
            for step in (s for s in answer["steps"] if s["status"] == "ok"):
                assert step["records_in"] == 1 and step["records_out"] == 1
                ((sample),) = step["sample"]
                head = (QUOTED_HEAD if path == "quoted.csv" else "") + "x" * 200
                assert sample["a"] == f"{head[:200]}\u2026 [truncated: {CHARS} chars]"
                assert sample["b"] == "tail" and sample["id"] == 1
