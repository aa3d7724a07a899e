"""Schemathesis against the app in process (WSGI) on a real database, with every check
schemathesis has, as the admin and without a token. Bounded and derandomized (the same
cases every run, and the app's ids from a seeded generator): EXAMPLES per operation and
phase. Zero failures is the bar.

The generator gets help only where JSON schema cannot state a rule, and only for *positive*
cases (negative cases are left alone): a plan's dependencies, unique names, distinct
export paths, a CSV quote other than the delimiter and a merge export's delete column other
than its key are repaired to follow them, its
templated fields lose their braces (a placeholder names a declared parameter) and its
parameters are one int `n` and a string `file`, with defaults (`valid_plan`: a rerun of a
run's values fits any later revision, a watch schedule finds its `file`); a run names no
parameter; a backfill ranges over a few values of `n` of a known pipeline
(`valid_backfill`); a watch schedule's glob is a relative path (`valid_watch`: the byte
limits of its names are beyond a pattern) and a known pipeline's is fuzz-b's; a
preview names a pipeline and a revision that exist, and a list's `before` becomes a cursor
of that list (`list_cursor`: a cursor is opaque, only the `next` of a page is one). A 412
to a valid If-Match counts as accepting valid data (it names another revision). Previews
read a small CSV in a data directory of the test's own."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import random
import re
import traceback
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, from_schema
from schemathesis.engine.events import EngineFinished, NonFatalError, ScenarioFinished
from schemathesis.transport.wsgi import WSGITransport

from dag.paths import relative_path_problem
from service.api.openapi.spec import build_spec, openapi_path
from service.api.routes import ROUTES
from service.config import Config
from service.domain.listing import INTEGER_MAX, encode_cursor, parse_statuses, parse_uuid
from service.domain.principals import ADMIN
from service.errors import ValidationFailed
from tests.integration.testapp import NOW, TOKENS, Api, plan_copy

EXAMPLES = 50
SEED = 20261201
PEOPLE = "id,name,amount,signup\n1,  Ann  ,5,2026-01-02\n2,Bob,x,\n3,Cy,7,2026-02-30\n"
# The list each path pages through: the kind of its cursors and whether a cursor's key is
# (created_at, id) or an integer (`service.domain.listing`).
LISTS = {
    "/api/v1/pipelines": ("pipelines", "time"),
    "/api/v1/pipelines/{pipeline_id}/revisions": ("revisions", "int"),
    "/api/v1/pipelines/{pipeline_id}/runs": ("runs", "time"),
    "/api/v1/pipelines/{pipeline_id}/schedules": ("schedules", "time"),
    "/api/v1/pipelines/{pipeline_id}/webhooks": ("webhooks", "time"),
    "/api/v1/pipelines/{pipeline_id}/backfills": ("backfills", "time"),
    "/api/v1/runs": ("runs", "time"),
    "/api/v1/audit": ("audit", "int"),
    "/api/v1/tokens": ("tokens", "time"),
}


POSITIVE_STATUSES = ["2xx", "3xx", "401", "403", "404", "409", "412", "429", "5xx"]
KNOWN_PIPELINES: list[str] = []  # made before the run: the previews' pipeline, then the
# backfills' (its plan declares `n`)
BACKFILLS = "/api/v1/pipelines/{pipeline_id}/backfills"


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    """Make a positive case's plan follow the rules beyond the schema, and its `before` a
    cursor of the list."""
    if case.meta is not None and case.meta.generation.mode.is_positive:
        body = case.body
        if isinstance(body, dict) and isinstance(body.get("plan"), dict):
            case.body = {**body, "plan": valid_plan(body["plan"])}
        if isinstance(body, dict) and isinstance(body.get("params"), dict):
            case.body = {**body, "params": {}}  # a run's: every parameter has a default
        if isinstance(body, dict) and isinstance(body.get("watch"), str) and KNOWN_PIPELINES:
            # a pipeline whose plan declares `file`: fuzz-b, or one the stateful phase made
            if case.path_parameters.get("pipeline_id") in KNOWN_PIPELINES:
                case.path_parameters = {**case.path_parameters, "pipeline_id": KNOWN_PIPELINES[-1]}
            case.body = {**body, "watch": valid_watch(body["watch"])}
        if case.operation.path == BACKFILLS and isinstance(body, dict) and KNOWN_PIPELINES:
            case.path_parameters = {**case.path_parameters, "pipeline_id": KNOWN_PIPELINES[-1]}
            case.body = valid_backfill(body)
        if isinstance(body, dict) and "pipeline_id" in body and KNOWN_PIPELINES:
            # a preview of a pipeline that exists, at revision 1 (which every pipeline has):
            # a generated id or revision names none, and the stateful check reads the 404
            # that rightly follows as a resource missing right after its creation
            case.body = {**case.body, "pipeline_id": KNOWN_PIPELINES[0]}
            if "revision" in body:
                case.body["revision"] = 1
        query = case.query
        if isinstance(query, dict) and isinstance(query.get("before"), str):
            cursor = list_cursor(case.operation.path, query["before"])
            case.query = {**query, "before": cursor}
    return case


def list_cursor(path: str, seed: str) -> str:
    """A cursor of the list at `path` whose key is derived from `seed` (the generated
    value), so positive cases still page from varied places."""
    kind, key = LISTS[path]
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()
    number = int.from_bytes(digest[:8])
    if key == "int":
        return encode_cursor(kind, number % INTEGER_MAX + 1)
    at = NOW - timedelta(microseconds=number % 10**14)
    return encode_cursor(kind, at, uuid.UUID(bytes=digest[8:24]))


def valid_backfill(body: dict[str, Any]) -> dict[str, Any]:
    """A backfill of fuzz-b's int parameter `n`, over at most ten values derived from
    the generated ends."""
    first, last = (body.get(end) for end in ("from", "to"))
    first = first % 1000 if isinstance(first, int) and not isinstance(first, bool) else 0
    span = last % 10 if isinstance(last, int) and not isinstance(last, bool) else 0
    body = {k: v for k, v in body.items() if k != "schedule_id"}  # the parameter's kind
    return {**body, "param": "n", "from": first, "to": first + span}


def valid_watch(glob: str) -> str:
    """`glob` when it is a relative path, else one derived from it."""
    if relative_path_problem(glob) is None:
        return glob
    return f"w{hashlib.sha256(glob.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}/*.csv"


def valid_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """`plan` with unique step names, an ingest first, dependencies on earlier steps only
    and distinct export paths; everything else as generated."""
    plan = copy.deepcopy(plan)
    # Every revision declares `n` and `file` alone, with defaults: a run may name none, a
    # backfill of `n` or a rerun of a run's values on the pipeline's current revision fits
    # whatever revision the stateful phase made last, and a watch schedule finds `file`.
    plan["params"] = {"n": {"type": "int", "default": 0}, "file": {"type": "string", "default": ""}}
    steps = plan.get("steps")
    if not isinstance(steps, list) or not steps:
        return plan
    if steps[0].get("type") != "ingest":
        steps[0] = copy.deepcopy(plan_copy()["steps"][0])
    names: list[str] = []
    for i, step in enumerate(steps):
        name = step["name"] if step["name"] not in names else f"s{i}"
        step["name"] = name
        if step["type"] == "ingest":
            step.pop("depends_on", None)
        else:
            step["depends_on"] = [
                d for d in dict.fromkeys(step.get("depends_on", [])) if d in names
            ] or [names[-1]]
        if step["type"] == "export" and step["config"].get("target") == "file":
            step["config"]["path"] = f"out-{i}.jsonl"
        export = step["config"] if step["type"] == "export" else {}
        if "deleted" in export and export["deleted"] == export.get("key"):
            export["deleted"] = f"{export['key']}_deleted"  # not the key column
        config = step.get("config")
        if isinstance(config, dict) and config.get("quote") == config.get("delimiter", ","):
            config["quote"] = '"'  # a quote other than the delimiter (never `"`)
        for key in ("path", "value"):  # no placeholder: the plan declares no parameter
            if isinstance(config, dict) and isinstance(config.get(key), str):
                config[key] = config[key].replace("{", "_").replace("}", "_")
        names.append(name)
    return plan


@pytest.fixture
def in_process_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work around schemathesis 4.32.5: its WSGI transport hands socket-only options
    (`max_redirects`, ...) on to werkzeug when a check re-sends a request (ignored_auth's
    probe), which raises TypeError. Only the third-party transport is wrapped."""
    send = WSGITransport.send

    def send_in_process(self: WSGITransport, case: Any, **kwargs: Any) -> Any:
        for name in ("max_redirects", "verify", "cert", "proxies"):
            kwargs.pop(name, None)
        return send(self, case, **kwargs)

    monkeypatch.setattr(WSGITransport, "send", send_in_process)


def run_schemathesis(
    app_factory, db_url: str, tmp_path: Path, headers: dict[str, str]
) -> tuple[int, list[str]]:
    """Every phase and every check against an in-process app; (cases sent, failures)."""
    data = tmp_path / "data"
    data.mkdir()
    for name in ("people.csv", "customers.csv"):
        (data / name).write_text(PEOPLE)
    api = app_factory(config=_config(db_url, tmp_path), new_id=_ids())
    KNOWN_PIPELINES.clear()
    params = {"n": {"type": "int", "default": 1}, "file": {"type": "string", "default": ""}}
    params_plan = {**plan_copy(), "params": params}
    for name, plan in (("fuzz-a", plan_copy()), ("fuzz-b", params_plan)):
        created = api.call("POST", "/pipelines", {"name": name, "plan": plan})
        assert created.status == 201, created.body
        KNOWN_PIPELINES.append(created.body["id"])
    settings = SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "headers": headers,
            "generation": {"max-examples": EXAMPLES, "deterministic": True},
            "checks": {
                "enabled": True,
                # a valid If-Match that names another revision is rightly a 412
                "positive_data_acceptance": {"expected-statuses": POSITIVE_STATUSES},
            },
        }
    )
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", api.client.app, config=settings)
    return _execute(schema)


def _config(db_url: str, tmp_path: Path) -> Config:
    return Config(
        database_url=db_url,
        sandbox_url=db_url,
        data_dir=tmp_path / "data",
        export_dir=tmp_path / "exports",
        reject_dir=tmp_path / "rejects",
    )


def _ids():
    """The same ids every run, as the same cases."""
    ids = random.Random(SEED)
    return lambda: uuid.UUID(int=ids.getrandbits(128), version=4)


def _execute(schema: Any) -> tuple[int, list[str]]:
    cases, failures = 0, []
    for event in from_schema(schema).execute():
        if isinstance(event, ScenarioFinished):
            cases += len(event.recorder.cases)
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    if check.status == Status.FAILURE:
                        failures.append(_describe(event, case_id, check))
            if event.status == Status.ERROR:
                failures.append(f"{event.label}: error")
        elif isinstance(event, NonFatalError):
            trace = "".join(traceback.format_exception(event.value)[-6:])
            failures.append(f"{event.label}: {event.value!r}\n{trace}")
        elif isinstance(event, EngineFinished):
            failures += [str(f) for f in event.failures]
    return cases, failures


def _describe(event: ScenarioFinished, case_id: str, check: Any) -> str:
    case = event.recorder.cases[case_id].value
    interaction = event.recorder.interactions.get(case_id)
    answer = interaction.response.content[:400] if interaction and interaction.response else b""
    failure = check.failure_info.failure
    return (
        f"{check.name} ({event.phase}): {case.method} {case.formatted_path} query={case.query}"
        f" headers={case.headers} body={str(case.body)[:400]}\n    -> {failure.title}:"
        f" {failure.message[:300]}\n    answer: {answer!r}"
    )


@pytest.mark.parametrize("role", [ADMIN, None], ids=["admin", "no-token"])
@pytest.mark.usefixtures("in_process_transport")
def test_schemathesis_finds_nothing(
    app_factory, db_url: str, tmp_path: Path, role: str | None
) -> None:
    headers = {"Authorization": f"Bearer {TOKENS[role]}"} if role else {}
    cases, failures = run_schemathesis(app_factory, db_url, tmp_path, headers)
    print(f"\nschemathesis ({role or 'no token'}): {cases} cases, {len(failures)} failures")
    assert cases > 0
    assert failures == [], "\n".join(sorted(set(failures)))
    assert not (tmp_path / "exports").exists()  # previews write nothing


def test_the_document_describes_every_route_of_the_one_table() -> None:
    # Regression: 12 of 16 operations lacked their path parameters, and two schemas both
    # registered as "Error" made the error body refer to itself.
    doc = build_spec(ROUTES)
    assert len(doc["paths"]) == len(ROUTES)
    for route in ROUTES:
        path, _ = openapi_path(route.path)
        for method in route.operations:
            op = doc["paths"][path][method]
            declared = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert declared == set(re.findall(r"\{(\w+)\}", path)), (path, method)
    schemas = doc["components"]["schemas"]
    assert schemas["Error"]["properties"]["error"] == {"$ref": "#/components/schemas/ErrorInfo"}
    assert schemas["PipelineCreate"]["properties"]["plan"] == {"$ref": "#/components/schemas/Plan"}
    assert len(schemas["ScheduleCreate"]["oneOf"]) == 3
    trigger = doc["paths"]["/api/v1/pipelines/{pipeline_id}/runs"]["post"]["responses"]
    assert {"200", "201", "400", "401", "403", "404", "413", "415", "429"} <= set(trigger)


OPERATION_IDS = {
    ("get", "/health"): "get_health",
    ("get", "/metrics"): "get_metrics",
    ("get", "/api/v1/openapi.json"): "get_openapi",
    ("get", "/api/v1/pipelines"): "list_pipelines",
    ("post", "/api/v1/pipelines"): "create_pipeline",
    ("post", "/api/v1/pipelines/preview"): "preview_plan",
    ("get", "/api/v1/pipelines/{pipeline_id}"): "get_pipeline",
    ("patch", "/api/v1/pipelines/{pipeline_id}"): "update_pipeline",
    ("delete", "/api/v1/pipelines/{pipeline_id}"): "delete_pipeline",
    ("post", "/api/v1/pipelines/{pipeline_id}/pause"): "pause_pipeline",
    ("post", "/api/v1/pipelines/{pipeline_id}/unpause"): "unpause_pipeline",
    ("get", "/api/v1/pipelines/{pipeline_id}/revisions"): "list_revisions",
    ("get", "/api/v1/pipelines/{pipeline_id}/revisions/{number}"): "get_revision",
    ("get", "/api/v1/pipelines/{pipeline_id}/runs"): "list_pipeline_runs",
    ("post", "/api/v1/pipelines/{pipeline_id}/runs"): "trigger_run",
    ("get", "/api/v1/pipelines/{pipeline_id}/schedules"): "list_schedules",
    ("post", "/api/v1/pipelines/{pipeline_id}/schedules"): "create_schedule",
    ("delete", "/api/v1/pipelines/{pipeline_id}/schedules/{schedule_id}"): "delete_schedule",
    ("get", "/api/v1/pipelines/{pipeline_id}/webhooks"): "list_webhooks",
    ("post", "/api/v1/pipelines/{pipeline_id}/webhooks"): "create_webhook",
    ("delete", "/api/v1/pipelines/{pipeline_id}/webhooks/{webhook_id}"): "delete_webhook",
    ("get", "/api/v1/runs"): "list_runs",
    ("get", "/api/v1/runs/{run_id}"): "get_run",
    ("get", "/api/v1/runs/{run_id}/steps/{step}/rejects"): "list_step_rejects",
    ("post", "/api/v1/runs/{run_id}/cancel"): "cancel_run",
    ("post", "/api/v1/runs/{run_id}/resume"): "resume_run",
    ("post", "/api/v1/runs/{run_id}/rerun"): "rerun_run",
    ("get", "/api/v1/pipelines/{pipeline_id}/backfills"): "list_backfills",
    ("post", "/api/v1/pipelines/{pipeline_id}/backfills"): "create_backfill",
    ("get", "/api/v1/pipelines/{pipeline_id}/cursors"): "list_cursors",
    ("delete", "/api/v1/pipelines/{pipeline_id}/cursors"): "reset_cursors",
    ("put", "/api/v1/pipelines/{pipeline_id}/cursors/{step}"): "set_cursor",
    ("delete", "/api/v1/pipelines/{pipeline_id}/cursors/{step}"): "reset_cursor",
    ("get", "/api/v1/backfills/{backfill_id}"): "get_backfill",
    ("post", "/api/v1/backfills/{backfill_id}/cancel"): "cancel_backfill",
    ("get", "/api/v1/audit"): "list_audit",
    ("get", "/api/v1/tokens"): "list_tokens",
    ("post", "/api/v1/tokens"): "create_token",
    ("delete", "/api/v1/tokens/{token_id}"): "revoke_token",
    ("post", "/api/v1/tokens/{token_id}/rotate"): "rotate_token",
}


def test_every_operation_has_its_stable_operation_id_and_if_match_and_etag_are_declared():
    doc = build_spec(ROUTES)
    got = {(m, path): op["operationId"] for path, ops in doc["paths"].items()
           for m, op in ops.items()}  # fmt: skip
    assert got == OPERATION_IDS  # renaming one breaks every generated client: never do it
    pipeline = doc["paths"]["/api/v1/pipelines/{pipeline_id}"]
    headers = [p for p in pipeline["patch"]["parameters"] if p["in"] == "header"]
    assert [(h["name"], h["required"]) for h in headers] == [("If-Match", False)]
    for method, status in (("get", "200"), ("patch", "200")):
        assert "ETag" in pipeline[method]["responses"][status]["headers"], method
    assert "412" in pipeline["patch"]["responses"]
    created = doc["paths"]["/api/v1/pipelines"]["post"]["responses"]["201"]
    assert "ETag" in created["headers"]


# --- what the fuzzing found, pinned --------------------------------------------------------


def _forged(kind: str, *key: str) -> str:
    """A cursor of list `kind` holding `key` as is (text no page would give out)."""
    raw = json.dumps([kind, *key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def test_hostile_list_parameters_are_400_naming_the_parameter(api: Api) -> None:
    # Regression: each of these was a 500 (int() of over 4,300 digits, a cursor key out of
    # the column's range, a year out of Python's range in UTC).
    pid = api.create_pipeline()
    some_id = str(uuid.uuid4())
    year_one = _forged("pipelines", "0001-01-01T00:00:00+01:00", some_id)
    no_time = _forged("schedules", "9999-12-31", some_id)
    cases = [
        ("/pipelines", "limit=" + "9" * 5000, "limit"),
        ("/runs", "limit=" + "0" * 5000 + "5", None),
        (f"/pipelines/{pid}/revisions", f"before={_forged('revisions', str(2**31))}", "before"),
        ("/audit", f"before={_forged('audit', str(2**63))}", "before"),
        ("/audit", f"before={_forged('audit', '9' * 250)}", "before"),
        ("/pipelines", f"before={year_one}", "before"),
        (f"/pipelines/{pid}/schedules", f"before={no_time}", "before"),
        ("/runs", "pipeline_id=" + some_id.replace("-", ""), "pipeline_id"),
        ("/runs", f"pipeline_id={{{some_id}}}", "pipeline_id"),
        ("/runs", "status=queued%0A", "status"),
    ]  # fmt: skip
    for path, query, field in cases:
        a = api.call("GET", f"{path}?{query}")
        if field is None:  # well-formed after all
            assert a.status == 200, (path, query[:80], a.body)
            continue
        assert a.status == 400, (path, query[:80], a.body)
        assert a.body["error"]["details"][0]["field"] == field, (path, query[:80])
    # Regression: a 500 (PostgreSQL reads no fractional-second offset); now read in UTC.
    odd = _forged("runs", "2026-01-01T00:00:00+05:30:15.5", some_id)
    assert api.call("GET", f"/runs?before={odd}").body == {"items": [], "next": None}


def test_preview_bodies_the_document_calls_invalid_are_400(api: Api) -> None:
    # Regression: both were previewed (200) though the document allows neither.
    pid = api.create_pipeline()
    for body, field in (
        ({"pipeline_id": pid.replace("-", "")}, "pipeline_id"),
        ({"pipeline_id": pid, "name": "riding along without a plan"}, "name"),
    ):
        a = api.call("POST", "/pipelines/preview", body)
        assert a.status == 400 and a.body["error"]["details"][0]["field"] == field, a.body


def test_documented_query_patterns_accept_what_the_parsers_accept() -> None:
    doc = build_spec(ROUTES)
    params = doc["paths"]["/api/v1/runs"]["get"]["parameters"]
    schema = {p["name"]: p["schema"] for p in params}
    samples = {
        "status": [
            "queued", "failed,succeeded", "failed, running", " ,queued, ", "queued,,failed",
            "\tqueued\t", "", ",", " ", "queued running", "QUEUED", "queued\n", "queued\u3000",
            "nope", "queued,nope",
        ],
        "pipeline_id": [
            str(uuid.uuid4()), str(uuid.uuid4()).upper(), uuid.uuid4().hex,
            f"{{{uuid.uuid4()}}}", f"urn:uuid:{uuid.uuid4()}", "", "12",
        ],
    }  # fmt: skip
    parsers = {
        "status": parse_statuses,
        "pipeline_id": lambda text: parse_uuid(text, "pipeline_id"),
    }
    for name, values in samples.items():
        validator = jsonschema_rs.validator_for(schema[name], validate_formats=True)
        for value in values:
            try:
                parsers[name](value)
                accepted = True
            except ValidationFailed:
                accepted = False
            assert validator.is_valid(value) == accepted, (name, value)
