"""JSON Schema building blocks of the OpenAPI document: closed objects, enums, references to
components, nullable values and strings without NUL (which PostgreSQL cannot store)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# One definition each: the step configs' schemas in `dag` use them too.
from dag.ops.schema import NO_NUL as NO_NUL
from dag.ops.schema import closed as closed


def enum(values: Iterable[str]) -> dict[str, Any]:
    """A string, one of `values`."""
    return {"type": "string", "enum": [str(v) for v in values]}


def ref(name: str) -> dict[str, Any]:
    """A reference to component `name` ("Document": any object, "Text": a string)."""
    if name == "Document":
        return {"type": "object"}
    if name == "Text":
        return {"type": "string"}
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` or null."""
    return {"anyOf": [schema, {"type": "null"}]}


def always(properties: Mapping[str, Any]) -> dict[str, Any]:
    """An object whose `properties` are always there (extra fields may be added later)."""
    return {"type": "object", "properties": dict(properties), "required": list(properties)}
