"""OpenLineage events of a real topology (coordinator and an executor) POSTed to a local
HTTP receiver by the client's HTTP transport (`OPENLINEAGE_URL`): the whole sequence of a
run whose first step fails and that is resumed, every event valid against the spec's JSON
Schemas, job names `<pipeline>` / `<pipeline>.<step>` in `OPENLINEAGE_NAMESPACE`, datasets
named for the files and sandbox tables, row counts as the database has them."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import pytest

from drills import Stack
from tests.lineage_spec import problems

NAMESPACE = "etl-lineage-test"
PIPELINE = "lineage_people"
PLAN = {
    "on_row_error": "reject",
    "steps": [
        {"name": "read", "type": "ingest", "retry": {"max_attempts": 1},
         "config": {"source": "file", "path": "people.csv",
                    "columns": {"id": "int", "amount": "int"}}},
        {"name": "label", "type": "transform", "depends_on": ["read"],
         "config": {"op": "map", "column": "status", "mapping": {"A": "active"},
                    "default": "inactive", "into": "label"},
         "checks": [{"check": "unique", "columns": ["id"]},
                    {"check": "accepted_values", "column": "label", "values": ["active"],
                     "severity": "warn"}]},
        {"name": "to_table", "type": "export", "depends_on": ["label"],
         "config": {"target": "table", "table": "lineage_people", "key": "id"}},
        {"name": "by_label", "type": "transform", "depends_on": ["label"],
         "config": {"op": "aggregate", "column": "amount", "group_by": ["label"]}},
        {"name": "to_file", "type": "export", "depends_on": ["by_label"],
         "config": {"target": "file", "path": "by_label.jsonl"}},
    ],
}  # fmt: skip
N = 1200  # three batches; record 7 is rejected (amount not an int)
PEOPLE = "id,name,status,amount\n" + "".join(
    f"{i},p{i},{'A' if i % 3 else 'I'},{'x' if i == 7 else i}\n" for i in range(1, N + 1)
)


class _Receiver(BaseHTTPRequestHandler):
    """Keeps every POST (path, JSON body) in `server.got`; answers 200."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:
            self.server.got.append((self.path, json.loads(body)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.got, server.lock = [], threading.Lock()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _events(receiver) -> list[dict]:
    with receiver.lock:
        return [body for _path, body in receiver.got]


def _by_run(events: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """Events by (job name, OpenLineage run id), each list in event-time order."""
    runs: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for e in sorted(events, key=lambda e: e["eventTime"]):
        runs[(e["job"]["name"], e["run"]["runId"])].append(e)
    return runs


def _pipeline_types(receiver, run_id: str, pipeline: str = PIPELINE) -> list[str]:
    return [e["eventType"] for e in _by_run(_events(receiver))[(pipeline, run_id)]]


def _step_types(receiver, step: str) -> list[list[str]]:
    """The event types of each OpenLineage run of `step`'s job."""
    runs = _by_run(_events(receiver))
    return [[e["eventType"] for e in runs[k]] for k in runs if k[0] == f"{PIPELINE}.{step}"]


def test_a_failed_and_resumed_run_tells_its_whole_sequence(stack_factory, receiver) -> None:
    url = f"http://127.0.0.1:{receiver.server_address[1]}"
    stack: Stack = stack_factory(
        env={
            "OPENLINEAGE_URL": url,
            "OPENLINEAGE_NAMESPACE": NAMESPACE,
            "ETL_FAULT": "fail_attempts:step=read:times=1",
        },
        files={"people.csv": PEOPLE},
    )
    stack.start(executors=("executor-1",))
    run = stack.wait_run(stack.trigger(stack.create(PIPELINE, PLAN))[1]["id"])
    run_id = run["id"]
    assert run["status"] == "failed"
    # The run's events come from the coordinator and the step's from the executor, each
    # process posting from its own queue: one may arrive before the other.
    stack.wait_for(lambda: _pipeline_types(receiver, run_id) == ["START", "FAIL"], what="run FAIL")
    stack.wait_for(
        lambda: _step_types(receiver, "read") == [["START", "FAIL"]], what="the read step's FAIL"
    )
    first = _by_run(_events(receiver))
    read_runs = [k for k in first if k[0] == f"{PIPELINE}.read"]
    failed = first[read_runs[0]][-1]["run"]["facets"]["errorMessage"]["message"]
    assert "injected failure of attempt 1" in failed
    assert {k[0] for k in first} == {PIPELINE, f"{PIPELINE}.read"}  # the others never ran

    assert stack.req("POST", f"/runs/{run_id}/resume")[0] == 202
    run = stack.wait_run(run_id, until=("succeeded",))
    stack.wait_for(
        lambda: _pipeline_types(receiver, run_id) == ["START", "FAIL", "START", "COMPLETE"],
        what="the resumed run's COMPLETE",
    )
    stack.wait_for(
        lambda: (
            sum(e["eventType"] == "COMPLETE" for e in _events(receiver)) == 1 + len(PLAN["steps"])
        ),
        what="every step's COMPLETE",
    )
    with receiver.lock:
        paths = {path for path, _ in receiver.got}
    events = _events(receiver)
    assert paths == {"/api/v1/lineage"}
    for e in events:
        assert problems(e) == [], e
        assert e["job"]["namespace"] == NAMESPACE
        assert e["run"]["facets"]["etl_run"]["traceId"] == run["trace_id"]

    runs = _by_run(events)
    step_names = [s["name"] for s in PLAN["steps"]]
    assert {name for name, _ in runs} == {PIPELINE, *(f"{PIPELINE}.{s}" for s in step_names)}
    assert [k for k in runs if k[0] == PIPELINE] == [(PIPELINE, run_id)]
    attempts = {(s["name"], a["number"]): a["outcome"] for s in run["steps"] for a in s["attempts"]}
    # one OpenLineage run per attempt, parented by the pipeline run
    assert len(runs) == 1 + len(attempts)
    for (name, _), seq in runs.items():
        if name == PIPELINE:
            continue
        step = name.removeprefix(f"{PIPELINE}.")
        number = seq[0]["run"]["facets"]["etl_run"]["attempt"]
        expected = {"failed": ["START", "FAIL"], "succeeded": ["START", "COMPLETE"]}
        assert [e["eventType"] for e in seq] == expected[attempts[(step, number)]], name
        for e in seq:
            parent = e["run"]["facets"]["parent"]
            assert parent["run"]["runId"] == run_id
            assert (parent["job"]["namespace"], parent["job"]["name"]) == (NAMESPACE, PIPELINE)
    assert sorted(n for (s, n) in attempts if s == "read") == [1, 2]
    # the resumed ingest ran the steps below it fused: their START came from the adoption
    fused = stack.sql(
        "SELECT count(*) FROM attempts WHERE run_id = %s AND fused_into IS NOT NULL", run_id
    )[0][0]
    assert fused >= 1

    done = {
        e["job"]["name"].removeprefix(f"{PIPELINE}."): e
        for e in events
        if e["eventType"] == "COMPLETE"
    }
    counts = {
        name: (records_in, records_out, rejected)
        for name, records_in, records_out, rejected in stack.sql(
            "SELECT name, records_in, records_out, rejected FROM step_runs WHERE run_id = %s",
            run_id,
        )
    }
    assert counts["read"] == (N, N - 1, 1)

    def ds(event: dict, kind: str) -> list[tuple]:
        return [
            (
                d["namespace"],
                d["name"],
                d.get(f"{kind[:-1]}Facets", {}).get(f"{kind[:-1]}Statistics", {}).get("rowCount"),
            )
            for d in event[kind]
        ]

    assert ds(done["read"], "inputs") == [("file", str(stack.data / "people.csv"), N)]
    assert ds(done["read"], "outputs") == [
        (NAMESPACE, f"{PIPELINE}.read", N - 1),
        ("file", str(stack.rejects / run_id / "read.jsonl"), 1),
    ]
    assert (stack.rejects / run_id / "read.jsonl").read_text().count("\n") == 1
    schema = done["read"]["outputs"][0]["facets"]["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in schema] == [
        ("id", "int"),
        ("name", "string"),
        ("status", "string"),
        ("amount", "int"),
    ]
    assert ds(done["label"], "outputs") == [(NAMESPACE, f"{PIPELINE}.label", counts["label"][1])]
    # its checks read its output: that dataset is one more input, with their results
    checked = done["label"]["inputs"][-1]
    assert (checked["namespace"], checked["name"]) == (NAMESPACE, f"{PIPELINE}.label")
    assertions = checked["inputFacets"]["dataQualityAssertions"]["assertions"]
    inactive = sum(1 for i in range(1, N + 1) if i % 3 == 0 and i != 7)
    assert [(a["assertion"], a["success"], a["actual"]) for a in assertions] == [
        ("unique", True, "0"), ("accepted_values", False, str(inactive))
    ]  # fmt: skip
    lineage = done["label"]["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert [(f["name"], f["field"]) for f in lineage["label"]["inputFields"]] == [
        (f"{PIPELINE}.read", "status")
    ]
    sandbox = urlparse(stack.db_url)
    (table_rows,) = stack.sql(
        "SELECT count(*) FROM sandbox.lineage_people WHERE run_id = %s", run_id
    )[0]
    assert table_rows == N - 1
    assert ds(done["to_table"], "outputs") == [
        (
            f"postgres://{sandbox.hostname}:{sandbox.port}",
            f"{stack.db_name}.sandbox.lineage_people",
            table_rows,
        )
    ]
    exported = stack.exports / run_id / "by_label.jsonl"
    assert ds(done["to_file"], "outputs") == [
        ("file", str(exported), exported.read_text().count("\n"))
    ]
    assert exported.read_text().count("\n") == 2  # active, inactive
    groups = done["by_label"]["outputs"][0]["facets"]["columnLineage"]
    assert [f["field"] for f in groups["dataset"]] == ["label"]
    assert [f["field"] for f in groups["fields"]["sum"]["inputFields"]] == ["amount"]


KILL_PLAN = {
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "people.csv", "columns": {"id": "int"}}},
        {"name": "out", "type": "export", "depends_on": ["read"],
         "config": {"target": "file", "path": "people.jsonl"}},
    ]
}  # fmt: skip


def test_an_attempt_whose_executor_died_ends_abort_from_the_reaper(stack_factory, receiver) -> None:
    """The executor running `out` is SIGKILLed: the coordinator's reaper ends the attempt
    (ABORT, its datasets named), the next attempt on the other executor STARTs and
    COMPLETEs."""
    stack: Stack = stack_factory(
        env={
            "OPENLINEAGE_URL": f"http://127.0.0.1:{receiver.server_address[1]}",
            "OPENLINEAGE_NAMESPACE": NAMESPACE,
            "ETL_FUSION": "0",
            "ETL_FAULT": "slow_batches:step=out:ms=250",
        },
        files={"people.csv": PEOPLE.replace(",x\n", ",7\n")},
    )
    stack.start()
    run_id = stack.trigger(stack.create("killed", KILL_PLAN))[1]["id"]

    def live() -> str | None:
        rows = stack.sql(
            "SELECT executor FROM attempts WHERE run_id = %s AND step_name = 'out'"
            " AND outcome IS NULL AND batches_done >= 1",
            run_id,
        )
        return rows[0][0] if rows else None

    executor = stack.wait_for(live, what="out's first batch")
    stack.kill(executor.split(":")[0], signal.SIGKILL)
    assert stack.wait_run(run_id, timeout=120)["status"] == "succeeded"
    stack.wait_for(
        lambda: _pipeline_types(receiver, run_id, "killed") == ["START", "COMPLETE"],
        what="run COMPLETE",
    )

    def ends() -> dict[int, dict]:
        return {
            e["run"]["facets"]["etl_run"]["attempt"]: e
            for e in _events(receiver)
            if e["job"]["name"] == "killed.out" and e["eventType"] != "START"
        }

    # the second attempt's COMPLETE comes from an executor, not the coordinator
    stack.wait_for(lambda: len(ends()) == 2, what="both attempts' ends")
    events, outs = _events(receiver), ends()
    for e in events:
        assert problems(e) == [], e
    assert {n: e["eventType"] for n, e in outs.items()} == {1: "ABORT", 2: "COMPLETE"}
    starts = [e for e in events if e["job"]["name"] == "killed.out" and e["eventType"] == "START"]
    assert sorted(e["run"]["facets"]["etl_run"]["attempt"] for e in starts) == [1, 2]
    abort = outs[1]
    assert abort["run"]["runId"] == next(
        e["run"]["runId"] for e in starts if e["run"]["facets"]["etl_run"]["attempt"] == 1
    )
    assert [d["name"] for d in abort["outputs"]] == [str(stack.exports / run_id / "people.jsonl")]
    assert outs[2]["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == N


def test_an_endpoint_that_never_answers_holds_no_step(stack_factory) -> None:
    """The lineage endpoint accepts connections and never answers (each event waits out
    the client's timeout and retries): the run still finishes in the time it takes without
    lineage, since events leave from a thread of their own."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def hold() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=hold, daemon=True).start()
    try:
        stack: Stack = stack_factory(
            env={"OPENLINEAGE_URL": f"http://127.0.0.1:{listener.getsockname()[1]}"},
            files={"people.csv": PEOPLE.replace(",x\n", ",7\n")},
        )
        stack.start(executors=("executor-1",))
        began = time.monotonic()
        run_id = stack.trigger(stack.create("unanswered", KILL_PLAN))[1]["id"]
        assert stack.wait_run(run_id, timeout=60)["status"] == "succeeded"
        # six events, each waiting 5 s and retried, would take minutes on the step's path
        assert time.monotonic() - began < 15
        assert held  # lineage was on: the coordinator and the executor tried to POST
    finally:
        listener.close()
        for s in held:
            s.close()
