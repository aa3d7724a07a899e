"""The data checks' JSON schemas in the OpenAPI document: a step's `checks` (one component
per kind of `dag.checks.CHECK_KINDS`, from the kind's own keys) and a step's results
(`CheckResult`). What a schema cannot say (a column the output lacks) fails the step at run
time."""

from __future__ import annotations

from typing import Any

from dag.checks import CHECK_KINDS, MAX_CHECKS, MAX_EXAMPLES, SEVERITIES
from service.api.openapi.shapes import NO_NUL, closed, enum, ref

# Every string of a check is without NUL, as every string of a request (PostgreSQL cannot
# store one); `pattern` applies to the strings of a union type only.
_NAME = {"type": "string", "minLength": 1, "pattern": NO_NUL}
_BOUND = {"type": ["number", "string"], "pattern": NO_NUL}
_COUNT = {"type": "integer", "minimum": 0}
_VALUE = {"type": ["string", "number", "null"], "pattern": NO_NUL}
_KEYS: dict[str, dict[str, Any]] = {
    "columns": {"type": "array", "minItems": 1, "uniqueItems": True, "items": _NAME},
    "column": _NAME,
    "values": {"type": "array", "minItems": 1, "items": _VALUE},
    "min": _BOUND,
    "max": _BOUND,
    "ratio": {"type": "number", "minimum": 0, "maximum": 1},
}
_KEYS_OF = {"row_count": {"min": _COUNT, "max": _COUNT}}
OUTCOMES = ("passed", "failed", "warned")


def _camel(value: str) -> str:
    return "".join(part.capitalize() for part in value.split("_"))


_EXAMPLES = (
    "the first failing records: for not_null, accepted_values and range "
    "{'record': ordinal in the step's output, 'line': where it starts in the input file (a "
    "file ingest only), 'file': that file relative to the data directory (a glob ingest "
    "only), 'values': the record (its checked columns and first others, 20 in all), 'null': "
    "the null columns (not_null) or 'value': the value (the others)}; for unique {'key', "
    "'records': how many hold it, 'first_record', 'first_file', 'first_line'}; for "
    "row_count [the records out]; for max_reject_ratio [the ratio]"
)


def check_components() -> dict[str, dict[str, Any]]:
    """`Checks` (a step's list), one `...Check` per kind, and `CheckResult`."""
    components: dict[str, dict[str, Any]] = {}
    mapping = {}
    for name, kind in CHECK_KINDS.items():
        keys = {k: _KEYS_OF.get(name, {}).get(k, _KEYS[k]) for k in kind.keys}
        schema = closed(
            {"check": enum([name]), "severity": enum(SEVERITIES), **keys},
            ["check", *kind.required],
        )
        if name in ("range", "row_count"):  # at least one bound
            schema["anyOf"] = [{"required": ["min"]}, {"required": ["max"]}]
        schema["description"] = (kind.__doc__ or "").strip().replace("\n    ", " ")
        component = f"{_camel(name)}Check"
        components[component] = schema
        mapping[name] = ref(component)["$ref"]
    components["Checks"] = {
        "type": "array",
        "maxItems": MAX_CHECKS,
        "items": {
            "oneOf": [{"$ref": r} for r in mapping.values()],
            "discriminator": {"propertyName": "check", "mapping": mapping},
        },
        "description": "data checks on the step's output; severity 'error' by default",
    }
    result = {
        "type": "object",
        "properties": {
            "check": enum(CHECK_KINDS),
            "severity": enum(SEVERITIES),
            "outcome": enum(OUTCOMES),
            "failing": _COUNT,
            "examples": {
                "type": "array",
                "items": {},
                "maxItems": MAX_EXAMPLES,
                "description": _EXAMPLES,
            },
            "message": {"type": "string"},
            **{k: v for k, v in _KEYS.items() if k not in ("min", "max")},
            "min": _BOUND,
            "max": _BOUND,
        },
        "required": ["check", "severity", "outcome", "failing", "examples", "message"],
        "description": (
            "a check's result over the step's whole output, with the check's own keys: "
            "'failed' (an error check: the step failed, nothing of it was published), "
            "'warned' (a warn check) or 'passed'; failing records and the first examples"
        ),
    }
    components["CheckResult"] = result
    return components
