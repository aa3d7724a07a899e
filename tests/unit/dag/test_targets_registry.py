"""The export-target and ingest-source registries (`dag.targets`, `dag.sources`): every module
is registered, and every target and source has a config schema that its validator agrees
with (the OpenAPI components are that schema). A target or source added without one, or
left out of its registry, fails here."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import jsonschema
import pytest

import dag.sources
import dag.targets
from dag.errors import FieldError
from dag.sources import SOURCES, IngestSource
from dag.stepconfig import EXPORT_TARGETS, INGEST_SOURCES, validate_config, with_defaults
from dag.targets import TARGETS, ExportTarget

# Valid configs of each target and source, every optional key given in one of them; a new
# target or source needs its own here.
EXAMPLES: dict[str, dict[str, list[dict[str, Any]]]] = {
    "export": {
        "file": [{"target": "file", "path": "out/a.csv", "format": "csv"}],
        "table": [
            {"target": "table", "table": "people", "key": "id", "mode": "append"},
            {"target": "table", "table": "people", "key": "id", "mode": "merge", "deleted": "gone"},
        ],
    },
    "ingest": {
        "file": [
            {
                "source": "file",
                "path": "in/*.csv",
                "format": "csv",
                "columns": {"id": "int"},
                "delimiter": ";",
                "null_values": ["NA"],
                "encoding": "latin-1",
                "quote": "'",
                "on_schema_change": "evolve",
            }
        ],
        "table": [{"source": "table", "table": "people", "cursor": "updated"}],
    },
}
REGISTRIES: dict[str, tuple[Any, dict[str, Any], str]] = {
    "export": (dag.targets, TARGETS, "target"),
    "ingest": (dag.sources, SOURCES, "source"),
}
# Modules of the registries that hold no target or source.
NOT_ENTRIES = {"target", "source"}
CASES = [(kind, name) for kind, (_, registry, _) in REGISTRIES.items() for name in registry]


@pytest.mark.parametrize("kind", list(REGISTRIES))
def test_every_module_is_registered_in_order(kind: str) -> None:
    package, registry, _ = REGISTRIES[kind]
    modules = {info.name for info in pkgutil.iter_modules(package.__path__)} - NOT_ENTRIES
    registered = []
    entry_type = ExportTarget if kind == "export" else IngestSource
    for name in sorted(modules):
        module = importlib.import_module(f"{package.__name__}.{name}")
        entries = getattr(module, "TARGETS" if kind == "export" else "SOURCES")
        assert entries and all(isinstance(e, entry_type) for e in entries), name
        registered += [e.name for e in entries]
    assert sorted(registered) == sorted(registry)
    assert (EXPORT_TARGETS if kind == "export" else INGEST_SOURCES) == ("file", "table")
    assert sorted(EXAMPLES[kind]) == sorted(registry)


def _schema(entry: ExportTarget | IngestSource) -> dict[str, Any]:
    """The entry's schema with the components it refers to, as the OpenAPI document has
    them."""
    components = getattr(entry, "components", {})
    return {**entry.schema, "components": {"schemas": dict(components)}}


def _refused(kind: str, config: dict[str, Any]) -> list[str]:
    errors: list[FieldError] = []
    validate_config(kind, config, "c", errors)
    return [e.field for e in errors]


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_a_schema_its_validator_agrees_with(kind: str, name: str) -> None:
    _, registry, field = REGISTRIES[kind]
    entry = registry[name]
    assert entry.keys[0] == field and entry.schema
    schema = _schema(entry)
    for config in EXAMPLES[kind][name]:
        assert set(config) <= set(entry.keys)
        jsonschema.validate(config, schema)
        assert _refused(kind, config) == []
        # A key outside the schema is refused by both.
        assert _refused(kind, {**config, "extra": 1}) == ["c.extra"]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**config, "extra": 1}, schema)
        # So is a config without the key that names its kind, or its wrong value.
        for wrong in ({k: v for k, v in config.items() if k != field}, {**config, field: "x"}):
            assert f"c.{field}" in _refused(kind, wrong)
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(wrong, schema)
    # Every key the validator allows is in the schema (of one of its shapes).
    shapes = [entry.schema, *getattr(entry, "components", {}).values()]
    allowed = {key for s in shapes for key in s.get("properties", {})}
    assert allowed == set(entry.keys)


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_a_required_key_is_required_by_both(kind: str, name: str) -> None:
    _, registry, _ = REGISTRIES[kind]
    entry = registry[name]
    shapes = [entry.schema, *getattr(entry, "components", {}).values()]
    for config in EXAMPLES[kind][name]:
        # The keys every shape the config has requires (a table export: its mode's).
        fits = [s for s in shapes if "required" in s and _valid(config, s)]
        assert fits, (name, config)
        required = set.intersection(*[set(s["required"]) for s in fits])
        for key in required:
            without = {k: v for k, v in config.items() if k != key}
            assert _refused(kind, without), (name, key)
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(without, _schema(entry))


def _valid(config: dict[str, Any], schema: dict[str, Any]) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(config)


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_defaults_keep_a_valid_config_valid(kind: str, name: str) -> None:
    _, registry, field = REGISTRIES[kind]
    minimal = {k: v for k, v in EXAMPLES[kind][name][0].items() if k in (field, "path", "table")}
    filled = with_defaults(kind, minimal)
    assert _refused(kind, filled) == []
    jsonschema.validate(filled, _schema(registry[name]))
