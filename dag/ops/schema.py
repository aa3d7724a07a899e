"""The JSON Schema pieces that transform ops' config properties are made of (the OpenAPI
document's plan components use them too): names, lists of names and literals."""

from __future__ import annotations

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
