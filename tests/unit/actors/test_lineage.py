"""Lineage events composed from plain values (actors.lineage.events): every event of every
kind of step validates against the OpenLineage JSON Schemas of the client's spec version;
names, datasets, row counts, column lineage and the parent facet are as documented; a
broken event fails the check. The emitter's queue drops and counts without blocking, and
the client's own configuration decides whether lineage is on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.serde import Serde
from openlineage.client.transport import Transport

from actors.lineage import Notice, Places, Sandbox, sandbox_of
from actors.lineage.emitter import LineageEmitter
from actors.lineage.events import RunFacts, StepFacts, attempt_run_id, compose
from dag import parse_plan
from tests.lineage_spec import problems

ROOT = Path(__file__).resolve().parents[3]
RUN_ID = "0b6c9a8e-2f41-4c35-9d7e-5a1f3e2b4c6d"
EVENT_TYPES = ("START", "COMPLETE", "FAIL", "ABORT")
AT = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)
PLACES = Places(
    data_dir=Path("/srv/data"),
    export_dir=Path("/srv/exports"),
    reject_dir=Path("/srv/rejects"),
    sandbox=Sandbox("db.example", 5433, "warehouse"),
)
PLAN = parse_plan(
    {"on_row_error": "reject",
     "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "in/people.csv", "columns": {"id": "int"}}},
        {"name": "more", "type": "ingest", "config": {"source": "table", "table": "extra"}},
        {"name": "label", "type": "transform", "depends_on": ["read"],
         "config": {"op": "map", "column": "status", "mapping": {"A": "active"}, "into": "label"}},
        {"name": "by_country", "type": "transform", "depends_on": ["label"],
         "config": {"op": "aggregate", "column": "amount", "group_by": ["country"]}},
        {"name": "to_file", "type": "export", "depends_on": ["by_country"],
         "config": {"target": "file", "path": "out/by_country.jsonl"}},
        {"name": "to_table", "type": "export", "depends_on": ["label"],
         "config": {"target": "table", "table": "people"}},
     ]}
)  # fmt: skip
PEOPLE = (("id", "int"), ("status", "string"), ("country", "string"), ("amount", "int"))
FACTS = RunFacts(
    pipeline="people",
    trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
    plan=PLAN,
    steps={
        "read": StepFacts(10, 8, 2, PEOPLE),
        "more": StepFacts(3, 3, 0, (("k", "string"),)),
        "label": StepFacts(8, 8, 0, (*PEOPLE, ("label", "string"))),
        "by_country": StepFacts(
            8,
            2,
            0,
            (
                ("country", "string"),
                ("count", "int"),
                ("sum", "int"),
                ("min", "int"),
                ("max", "int"),
            ),
        ),
        "to_file": StepFacts(2, 2, 0, None),
        "to_table": StepFacts(8, 8, 0, None),
    },
    params={"day": "2026-12-01", "n": 7, "run_id": RUN_ID},
)


def _event(event_type: str, step: str | None = None, **kw) -> dict:
    notice = Notice(event_type, RUN_ID, AT, step, 1 if step else None, **kw)
    return json.loads(Serde.to_json(compose(notice, FACTS, namespace="etl", places=PLACES)))


def _every_event() -> list[dict]:
    events = [_event(t) for t in EVENT_TYPES]
    for step in PLAN.step_names:
        for t in EVENT_TYPES:
            events.append(_event(t, step, error="ValueError: boom"))
    return events


def test_every_event_validates_against_the_client_spec_version() -> None:
    events = _every_event()
    assert len(events) == 4 + 4 * len(PLAN.steps)
    for event in events:
        assert (
            event["schemaURL"]
            == "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
        )
        assert problems(event) == [], (event["job"]["name"], event["eventType"])


def test_a_broken_event_fails_the_check() -> None:
    good = _event("COMPLETE", "label")
    no_name = json.loads(json.dumps(good))
    del no_name["job"]["name"]
    bad_count = json.loads(json.dumps(good))
    bad_count["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] = "eight"
    unknown = json.loads(json.dumps(good))
    unknown["run"]["facets"]["parent"]["_schemaURL"] = (
        "https://openlineage.io/spec/facets/9-9-9/X.json"
    )
    no_trace = json.loads(json.dumps(good))
    del no_trace["run"]["facets"]["etl_run"]["traceId"]
    bad_value = json.loads(json.dumps(good))
    bad_value["run"]["facets"]["etl_params"]["params"]["day"] = ["2026-12-01"]
    bad_type = json.loads(json.dumps(good))
    bad_type["eventType"] = "FINISHED"
    for broken, expected in [
        (no_name, "'name' is a required property"),
        (bad_count, "'eight' is not of type 'integer'"),
        (unknown, "not among the vendored ones"),
        (no_trace, "'traceId' is a required property"),
        (bad_value, "is not of type 'string', 'integer'"),
        (bad_type, "'FINISHED' is not one of"),
    ]:
        found = problems(broken)
        assert any(expected in p for p in found), found


def test_names_datasets_row_counts_and_parent() -> None:
    run = _event("START")
    assert (run["job"]["namespace"], run["job"]["name"]) == ("etl", "people")
    assert run["run"]["runId"] == RUN_ID
    assert run["run"]["facets"]["etl_run"]["traceId"] == FACTS.trace_id
    assert run["job"]["facets"]["jobType"]["jobType"] == "DAG"
    assert run["run"]["facets"]["etl_params"]["params"] == FACTS.params

    read = _event("COMPLETE", "read")
    assert read["job"]["name"] == "people.read"
    assert read["run"]["runId"] == attempt_run_id(RUN_ID, "read", 1)
    assert read["run"]["facets"]["etl_params"]["params"] == FACTS.params
    parent = read["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == RUN_ID
    assert (parent["job"]["namespace"], parent["job"]["name"]) == ("etl", "people")
    assert [(d["namespace"], d["name"]) for d in read["inputs"]] == [
        ("file", "/srv/data/in/people.csv")
    ]
    assert read["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] == 10
    # the committed output, and the reject file with the rejected records
    out, rejects = read["outputs"]
    assert (out["namespace"], out["name"]) == ("etl", "people.read")
    assert out["outputFacets"]["outputStatistics"]["rowCount"] == 8
    assert [(f["name"], f["type"]) for f in out["facets"]["schema"]["fields"]] == list(PEOPLE)
    assert (rejects["name"], rejects["outputFacets"]["outputStatistics"]["rowCount"]) == (
        f"/srv/rejects/{RUN_ID}/read.jsonl",
        2,
    )

    more = _event("START", "more")
    assert [(d["namespace"], d["name"]) for d in more["inputs"]] == [
        ("postgres://db.example:5433", "warehouse.sandbox.extra")
    ]
    assert "outputStatistics" not in more["outputs"][0].get("outputFacets", {})  # only at the end
    to_file = _event("COMPLETE", "to_file")
    assert [(d["namespace"], d["name"]) for d in to_file["inputs"]] == [
        ("etl", "people.by_country")
    ]
    assert to_file["outputs"][0]["name"] == f"/srv/exports/{RUN_ID}/out/by_country.jsonl"
    assert to_file["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2
    to_table = _event("COMPLETE", "to_table")
    assert to_table["outputs"][0]["name"] == "warehouse.sandbox.people"
    # an export's schema is its input's when it recorded none
    assert len(to_table["outputs"][0]["facets"]["schema"]["fields"]) == len(PEOPLE) + 1

    failed = _event("FAIL", "label", error="ValueError: boom")
    assert failed["run"]["facets"]["errorMessage"]["message"] == "ValueError: boom"


def _lineage(event: dict) -> dict:
    facet = event["outputs"][0]["facets"]["columnLineage"]
    return {
        name: [
            (f["name"], f["field"], f["transformations"][0]["subtype"]) for f in v["inputFields"]
        ]
        for name, v in facet["fields"].items()
    }


def test_column_lineage_of_map_into_and_aggregate_groups() -> None:
    label = _lineage(_event("COMPLETE", "label"))
    assert label["label"] == [("people.read", "status", "TRANSFORMATION")]
    assert label["id"] == [("people.read", "id", "IDENTITY")]
    by_country = _event("COMPLETE", "by_country")
    agg = _lineage(by_country)
    assert agg["country"] == [("people.label", "country", "IDENTITY")]
    assert agg["sum"] == [("people.label", "amount", "AGGREGATION")]
    dataset = by_country["outputs"][0]["facets"]["columnLineage"]["dataset"]
    assert [(f["field"], f["transformations"][0]["subtype"]) for f in dataset] == [
        ("country", "GROUP_BY")
    ]


class _Blocking(Transport):
    """A transport that holds each event until released (an endpoint that hangs)."""

    kind = "blocking"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.got: list = []

    def emit(self, event) -> None:
        self.release.wait(10)
        self.got.append(event)


def test_a_full_queue_drops_and_counts_without_blocking() -> None:
    transport = _Blocking()
    client = OpenLineageClient(transport=transport)
    event = compose(Notice("START", RUN_ID, AT), FACTS, namespace="etl", places=None)
    emitter = LineageEmitter(client, lambda n: event, max_queued=2).start()
    assert emitter.notify(0)
    deadline = time.monotonic() + 5
    while emitter._queue.qsize() and time.monotonic() < deadline:  # the thread holds the first
        time.sleep(0.01)
    began = time.monotonic()
    accepted = [emitter.notify(i) for i in range(1, 8)]
    spent = time.monotonic() - began
    assert accepted == [True, True] + [False] * 5
    assert emitter.dropped == 5 and spent < 0.5
    transport.release.set()
    assert emitter.close(5)
    assert (emitter.emitted, emitter.failed, len(transport.got)) == (3, 0, 3)


def test_stopping_with_an_endpoint_that_hangs_is_bounded() -> None:
    event = compose(Notice("START", RUN_ID, AT), FACTS, namespace="etl", places=None)
    emitter = LineageEmitter(OpenLineageClient(transport=_Blocking()), lambda n: event).start()
    emitter.notify(1)
    began = time.monotonic()
    assert emitter.close(0.5) is False  # the event still hangs in the transport
    assert time.monotonic() - began < 2


def test_a_failing_build_or_transport_is_counted_not_raised() -> None:
    client = OpenLineageClient(transport=_Blocking())

    def build(n):
        raise RuntimeError("no database")

    emitter = LineageEmitter(client, build).start()
    emitter.notify(1)
    assert emitter.close(5)
    assert (emitter.failed, emitter.emitted) == (1, 0)


CHECK = (
    "import logging, sys; logging.basicConfig(stream=sys.stderr, level=logging.INFO);"
    "from actors.lineage.emitter import configured_client; c = configured_client();"
    "print(c and c.transport.kind)"
)


@pytest.mark.parametrize(
    ("env", "kind"),
    [
        ({}, "None"),
        ({"OPENLINEAGE_URL": "http://127.0.0.1:9"}, "http"),
        ({"OPENLINEAGE__TRANSPORT__TYPE": "console"}, "console"),
        ({"OPENLINEAGE_URL": "http://127.0.0.1:9", "OPENLINEAGE_DISABLED": "true"}, "None"),
    ],
    ids=["nothing", "url", "console", "disabled"],
)
def test_the_client_configuration_decides_and_off_is_silent(tmp_path: Path, env, kind) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    # no openlineage.yml in the working directory or the home directory
    done = subprocess.run(
        [sys.executable, "-c", CHECK],
        env={**clean, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), **env},
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == kind
    if kind == "None":
        assert "openlineage" not in done.stderr.lower(), done.stderr


def test_sandbox_address_from_url_or_dsn() -> None:
    assert sandbox_of("postgresql://etl@db.internal:6432/warehouse") == Sandbox(
        "db.internal", 6432, "warehouse"
    )
    assert sandbox_of("postgresql://postgres@127.0.0.1/etl") == Sandbox("127.0.0.1", 5432, "etl")
    assert sandbox_of("host=h dbname=d") == Sandbox("h", 5432, "d")


def test_a_step_with_checks_tells_their_results_in_the_assertions_facet() -> None:
    """The checked dataset (the step's output; an export's target) is an input of the
    step's COMPLETE and FAIL events with the standard `dataQualityAssertions` facet, valid
    against its official JSON Schema; no other event and no step without checks has it."""
    results = (
        {"check": "unique", "columns": ["id"], "severity": "error", "outcome": "passed",
         "failing": 0, "examples": [], "message": "passed"},
        {"check": "range", "column": "amount", "min": 0, "severity": "warn",
         "outcome": "warned", "failing": 2, "message": "2 value(s) of amount are outside",
         "examples": [{"record": 3, "line": 4, "value": -1, "values": {"amount": -1}}]},
        {"check": "row_count", "min": 100, "severity": "error", "outcome": "failed",
         "failing": 1, "examples": [8], "message": "8 record(s) out of bounds"},
    )  # fmt: skip
    steps = dict(FACTS.steps)
    steps["read"] = StepFacts(10, 8, 2, PEOPLE, checks=results)
    steps["to_table"] = StepFacts(8, 8, 0, None, checks=results[:1])
    facts = RunFacts(FACTS.pipeline, FACTS.trace_id, PLAN, steps)

    def event(event_type: str, step: str) -> dict:
        notice = Notice(event_type, RUN_ID, AT, step, 1)
        return json.loads(Serde.to_json(compose(notice, facts, namespace="etl", places=PLACES)))

    for event_type in ("COMPLETE", "FAIL"):
        read = event(event_type, "read")
        assert problems(read) == []
        source, checked = read["inputs"]
        assert source["name"] == "/srv/data/in/people.csv"
        assert (checked["namespace"], checked["name"]) == ("etl", "people.read")
        assertions = checked["inputFacets"]["dataQualityAssertions"]
        assert assertions["_schemaURL"].endswith(
            "/1-1-0/DataQualityAssertionsDatasetFacet.json#/$defs/DataQualityAssertionsDatasetFacet"
        )
        shown = [
            (a["assertion"], a["success"], a.get("column"), a["severity"], a.get("actual"))
            for a in assertions["assertions"]
        ]
        assert shown == [
            ("unique", True, "id", "error", "0"),
            ("range", False, "amount", "warn", "2"),
            ("row_count", False, None, "error", "8"),
        ]
        assert checked["facets"]["schema"]["fields"][0]["name"] == "id"
        table = event(event_type, "to_table")
        assert problems(table) == []
        assert table["inputs"][-1]["name"] == table["outputs"][0]["name"]
    assert len(event("START", "read")["inputs"]) == 1
    assert len(event("COMPLETE", "label")["inputs"]) == 1

    multi = "postgresql://etl@db1:5433,db2:5434/etl?target_session_attrs=read-write"
    assert sandbox_of(multi) == Sandbox("db1", 5433, "etl")
