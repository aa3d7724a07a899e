"""Checks an OpenLineage event (as JSON) against the JSON Schemas of the spec version the
pinned client writes (tests/fixtures/openlineage/README.md): the event against the schema
its `schemaURL` names, every facet against the one its `_schemaURL` names."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILES = [
    *sorted((ROOT / "tests" / "fixtures" / "openlineage").glob("*.json")),
    ROOT / "docs" / "openlineage" / "EtlRunFacet.json",
    ROOT / "docs" / "openlineage" / "EtlParamsRunFacet.json",
]


def _registry() -> Registry:
    resources = []
    for path in SCHEMA_FILES:
        contents = json.loads(path.read_text())
        resources.append((contents["$id"], Resource.from_contents(contents)))
    return Registry().with_resources(resources)


REGISTRY = _registry()


def problems(event: dict[str, Any]) -> list[str]:
    """Every way `event` breaks its schemas ([] when it is valid)."""
    found = _against(event.get("schemaURL"), event, "event")
    for where, facet in facets_of(event):
        found += _against(
            facet.get("_schemaURL") if isinstance(facet, dict) else None, facet, where
        )
    run_id = event.get("run", {}).get("runId")
    try:
        uuid.UUID(str(run_id))
    except ValueError:
        found.append(f"run.runId: not a UUID: {run_id!r}")
    try:
        datetime.fromisoformat(str(event.get("eventTime")))
    except ValueError:
        found.append(f"eventTime: not a date-time: {event.get('eventTime')!r}")
    return found


def facets_of(event: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(where, facet) for every facet of the event, datasets' included."""
    holders = [
        ("run", event.get("run", {}), ("facets",)),
        ("job", event.get("job", {}), ("facets",)),
    ]
    for kind, key in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        for i, ds in enumerate(event.get(kind) or []):
            holders.append((f"{kind}[{i}]", ds, ("facets", key)))
    for where, holder, keys in holders:
        for key in keys:
            for name, facet in (holder.get(key) or {}).items():
                yield f"{where}.{key}.{name}", facet


def _against(url: str | None, instance: Any, where: str) -> list[str]:
    if not url:
        return [f"{where}: no schema URL"]
    validator = Draft202012Validator(
        {"$ref": url}, registry=REGISTRY, format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    try:
        return [
            f"{where}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(instance)
        ]
    except Unresolvable as exc:
        return [f"{where}: schema {url} is not among the vendored ones ({exc})"]
