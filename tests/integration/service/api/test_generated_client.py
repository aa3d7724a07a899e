"""A client generated from the served OpenAPI document by `openapi-python-client` works: the
generator warns about nothing, every operation is a function named by its `operationId`,
step configs are typed models (by their discriminator), and the client drives a real
topology (coordinator + two executors): create pipelines, update one with If-Match, trigger
a run and read it to its end, page through a list."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from drills import ADMIN_TOKEN, ROOT, Stack

PACKAGE = "etl_client"


@pytest.fixture
def generated(demo_stack: Stack, tmp_path: Path) -> Iterator[tuple[ModuleType, str]]:
    """The client package generated from the running API's document, and its output."""
    with urllib.request.urlopen(f"{demo_stack.api.base}/api/v1/openapi.json", timeout=30) as r:
        (tmp_path / "openapi.json").write_bytes(r.read())
    bin_dir = Path(sys.executable).parent  # its post-generation hook runs ruff from PATH
    done = subprocess.run(
        [str(bin_dir / "openapi-python-client"), "generate", "--path", "openapi.json",
         "--meta", "none", "--output-path", PACKAGE],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE), output
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def _api(name: str) -> ModuleType:
    return importlib.import_module(f"{PACKAGE}.api.default.{name}")


def test_the_generated_client_drives_a_real_topology(
    generated: tuple[ModuleType, str], demo_stack: Stack
) -> None:
    package, output = generated
    assert "Warning" not in output, output
    ids = sorted(p.stem for p in Path(package.__file__).parent.glob("api/default/*.py"))
    with urllib.request.urlopen(f"{demo_stack.api.base}/api/v1/openapi.json", timeout=30) as r:
        document = json.loads(r.read())
    operation_ids = sorted(op["operationId"] for ops in document["paths"].values()
                           for op in ops.values())  # fmt: skip
    assert [i for i in ids if i != "__init__"] == operation_ids

    models = importlib.import_module(f"{PACKAGE}.models")
    client = package.AuthenticatedClient(base_url=demo_stack.api.base, token=ADMIN_TOKEN)
    plan = json.loads((ROOT / "fixtures" / "plans" / "demo.json").read_text())["plan"]

    # create (201, typed), then a new revision against the current one (If-Match)
    created = _api("create_pipeline").sync_detailed(
        client=client, body=models.PipelineCreate.from_dict({"name": "demo", "plan": plan})
    )
    assert created.status_code == 201, created.content
    pipeline = created.parsed
    assert (pipeline.name, pipeline.revision) == ("demo", 1)
    # every step's config is a typed model, chosen by its `source`, `op` or `target`
    configs = {step.name: step.config for step in pipeline.plan.steps}
    kinds = {name: type(config).__name__ for name, config in configs.items()}
    assert kinds == {
        "read": "FileIngestConfig", "clean": "NormalizeWhitespaceTransformConfig",
        "label": "MapTransformConfig", "active": "FilterEqTransformConfig",
        "active_to_table": "AppendTableExportConfig", "active_to_file": "FileExportConfig",
        "amount_by_country": "AggregateTransformConfig",
        "amount_by_country_to_file": "FileExportConfig",
    }, kinds  # fmt: skip
    assert configs["read"].path == "customers.csv"
    assert configs["label"].into == "status_label" and configs["active_to_table"].key == "id"
    assert not any(
        c.additional_properties for c in configs.values() if hasattr(c, "additional_properties")
    )
    assert created.headers["ETag"] == '"1"'
    patch = models.PipelinePatch.from_dict({"plan": plan})
    stale = _api("update_pipeline").sync_detailed(
        pipeline.id, client=client, body=patch, if_match='"7"'
    )
    assert stale.status_code == 412 and stale.parsed.error.code == "precondition_failed"
    updated = _api("update_pipeline").sync(pipeline.id, client=client, body=patch, if_match='"1"')
    assert updated.revision == 2

    # trigger, then read the run through the client until it ends
    trigger = _api("trigger_run").sync_detailed(pipeline.id, client=client)
    assert trigger.status_code == 201, trigger.content
    run_id = trigger.parsed.id
    deadline = time.monotonic() + 60
    run = _api("get_run").sync(run_id, client=client)
    while run.status not in ("succeeded", "failed") and time.monotonic() < deadline:
        time.sleep(0.1)
        run = _api("get_run").sync(run_id, client=client)
    assert run.status == "succeeded", run.to_dict()
    steps = {s.name: s for s in run.steps}
    assert steps["read"].records_in == 40 and steps["read"].rejected == 3
    assert all(s.status == "succeeded" for s in steps.values())

    # list pages: follow `next` through the client until the list ends
    for i in range(4):
        body = models.PipelineCreate.from_dict({"name": f"more-{i}", "plan": plan})
        assert _api("create_pipeline").sync_detailed(client=client, body=body).status_code == 201
    names, pages = [], 0
    page = _api("list_pipelines").sync(client=client, limit=2)
    while True:
        pages += 1
        names += [item.name for item in page.items]
        if not page.next_:
            break
        page = _api("list_pipelines").sync(client=client, limit=2, before=page.next_)
    assert pages == 3
    assert names == ["more-3", "more-2", "more-1", "more-0", "demo"]
    runs = _api("list_pipeline_runs").sync(pipeline.id, client=client)
    assert [r.id for r in runs.items] == [run_id]
