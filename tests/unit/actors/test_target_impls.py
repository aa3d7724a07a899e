"""The implementations of the export targets and ingest sources (`actors.targets`,
`actors.sources`): every target and source declared in `dag` has one, in a module of its
own that is registered; every sink has the `Sink` interface; every preview view fits the
OpenAPI schema it declares; every lineage facet names a dataset. A target or source without
a sink, reader, preview, lineage, purge or run view fails here (or cannot be built)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import actors.sources
import actors.targets
from actors.datasets import Places, Sandbox
from actors.sources import SOURCE_IMPLS, SourceImpl
from actors.stepio import Sink, StepEnv
from actors.targets import TARGET_IMPLS, TargetImpl
from dag import parse_plan
from dag.sources import SOURCES
from dag.targets import TARGETS

CONFIGS = {
    "file": {"target": "file", "path": "out/a.csv", "format": "csv"},
    "table": {"target": "table", "table": "people", "key": "id", "mode": "merge"},
}
SOURCE_CONFIGS = {
    "file": {"source": "file", "path": "in/a.csv"},
    "table": {"source": "table", "table": "people", "cursor": "id"},
}
COLUMNS = {"id": "int", "name": "string"}
RECORDS = [{"id": 1, "name": "a"}, {"id": 2, "name": None}]
SANDBOX = Sandbox("db.example", 5432, "sandbox")
RUN_ID = "00000000-0000-0000-0000-000000000001"


@pytest.mark.parametrize(
    ("package", "registry", "declared", "attr", "kind"),
    [
        (actors.targets, TARGET_IMPLS, TARGETS, "TARGETS", TargetImpl),
        (actors.sources, SOURCE_IMPLS, SOURCES, "SOURCES", SourceImpl),
    ],
)
def test_every_declared_entry_has_a_registered_implementation(
    package: Any, registry: dict, declared: dict, attr: str, kind: type
) -> None:
    assert list(registry) == list(declared)
    modules = {info.name for info in pkgutil.iter_modules(package.__path__)} - {
        "target",
        "source",
    }
    assert modules == set(declared)  # one module each, named as the entry
    for name in modules:
        entries = getattr(importlib.import_module(f"{package.__name__}.{name}"), attr)
        assert [e.name for e in entries] == [name]
        assert all(isinstance(e, kind) for e in entries)


def _protocol_members(protocol: type) -> set[str]:
    return {
        n
        for n in [*protocol.__dict__, *protocol.__annotations__]
        if not n.startswith("_") and n != "__annotations__"
    }


@pytest.mark.parametrize("name", list(TARGET_IMPLS))
def test_a_sink_has_the_sink_interface(name: str) -> None:
    sink = TARGET_IMPLS[name].sink
    assert inspect.isclass(sink)
    for member in _protocol_members(Sink):
        assert hasattr(sink, member), (name, member)
        if callable(getattr(Sink, member, None)):
            expected = inspect.signature(getattr(Sink, member))
            assert inspect.signature(getattr(sink, member)) == expected, (name, member)
    assert TARGET_IMPLS[name].sink.stages_in_commit == TARGETS[name].stages_rows


def _env(tmp_path: Path) -> StepEnv:
    return StepEnv("r", tmp_path / "data", tmp_path / "exports", tmp_path / "rejects", None, None)


def _step(kind: str, config: dict[str, Any]):
    steps = [{"name": "read", "type": "ingest", "config": SOURCE_CONFIGS["file"]}]
    if kind == "export":
        steps.append({"name": "out", "type": "export", "config": config, "depends_on": ["read"]})
    else:
        steps = [{"name": "read", "type": "ingest", "config": config}]
    plan = parse_plan({"steps": steps})
    return plan.step(steps[-1]["name"])


@pytest.mark.parametrize("name", list(TARGET_IMPLS))
def test_a_preview_view_fits_its_schema_and_reads_in_words(name: str, tmp_path: Path) -> None:
    target = TARGET_IMPLS[name]
    step = _step("export", CONFIGS[name])
    view = target.preview(step, _env(tmp_path), COLUMNS)
    assert view.write(RECORDS, 1) == []
    shown = view.finish([])
    schema = {
        "type": "object",
        "properties": target.view_schema,
        "required": list(target.view_schema),
    }
    jsonschema.validate(shown, schema)
    assert shown["target"] == name
    words = target.view_text(shown)
    assert words.headline and any(bold for _, bold in words.headline)
    assert words.text is not None or words.rows


@pytest.mark.parametrize("name", list(TARGET_IMPLS))
def test_a_target_names_its_lineage_dataset_and_its_run_view(name: str, tmp_path: Path) -> None:
    target = TARGET_IMPLS[name]
    places = Places(tmp_path, tmp_path / "exports", tmp_path / "rejects", SANDBOX)
    namespace, dataset = target.dataset(places, RUN_ID, "out", CONFIGS[name])
    assert namespace and dataset
    step = {"name": "out", "status": "running", "config": CONFIGS[name]}
    shown = target.run_view(tmp_path / "exports", RUN_ID, step, None)
    assert "where" in shown and "state" in shown


@pytest.mark.parametrize("name", list(SOURCE_IMPLS))
def test_a_source_has_a_reader_a_view_and_a_lineage_dataset(name: str, tmp_path: Path) -> None:
    source = SOURCE_IMPLS[name]
    config = SOURCE_CONFIGS[name]
    assert inspect.isclass(source.reader) and hasattr(source.reader, "batches")
    view = source.view(config)
    schema = {
        "type": "object",
        "properties": source.view_schema,
        "required": list(source.view_schema),
    }
    jsonschema.validate(view, schema)
    assert view["source"] == name and source.where(view)
    places = Places(tmp_path, tmp_path / "exports", tmp_path / "rejects", SANDBOX)
    namespace, dataset = source.dataset(places, config)
    assert namespace and dataset
    assert source.progress(config, {}, tmp_path) is None  # nothing read yet, or unknown
