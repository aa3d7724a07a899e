"""The JSON Schema pieces that step configs are made of (transform ops, export targets and
ingest sources; the OpenAPI document's plan components use them too): names, lists of names,
literals, closed objects and references to components."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dag.limits import INT64_MAX, INT64_MIN

# A string without NUL (which PostgreSQL cannot store).
NO_NUL = r"^[^\u0000]*$"

TEXT: dict[str, Any] = {"type": "string", "pattern": NO_NUL}
# A column name.
NAME: dict[str, Any] = {"type": "string", "minLength": 1, "pattern": NO_NUL}
# A value a typed record can hold: a string, an int64 or null.
LITERAL: dict[str, Any] = {
    "oneOf": [
        TEXT,
        {"type": "integer", "minimum": INT64_MIN, "maximum": INT64_MAX},
        {"type": "null"},
    ]
}
# A non-empty list of distinct column names.
NAMES: dict[str, Any] = {"type": "array", "minItems": 1, "uniqueItems": True, "items": NAME}


def one_of(values: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """A string, one of `values`."""
    return {"type": "string", "enum": [str(v) for v in values]}


def closed(properties: Mapping[str, Any], required: list[str]) -> dict[str, Any]:
    """An object of exactly `properties`, `required` among them."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": required,
        "additionalProperties": False,
    }


def component(name: str) -> dict[str, Any]:
    """A reference to the OpenAPI document's component `name`."""
    return {"$ref": f"#/components/schemas/{name}"}
