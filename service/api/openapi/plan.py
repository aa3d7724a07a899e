"""The plan's JSON schemas in the OpenAPI document (`Plan`, its steps and configs), built from
the rules of `dag.plan` so that the document and the validator cannot disagree on a name, a
type or a limit. What a schema cannot say, `dag` still checks (a 400 with field paths)."""

from __future__ import annotations

from typing import Any

from dag import params
from dag import plan as rules
from dag.dialect import ENCODINGS, SCHEMA_CHANGES
from dag.ops import OPS
from dag.ops.schema import NAME
from dag.paths import MAX_PATH_BYTES
from dag.stepconfig import MAX_NULL_VALUE_CHARS, MAX_NULL_VALUES
from service.api.openapi.shapes import NO_NUL, closed, enum, ref

# Relative, no `..` segment, no NUL, not naming a folder; names of at most 255 characters
# (the byte limit of `dag.plan` is exact for ASCII).
_SEGMENT = r"[^/\\\u0000]{1,255}"
_REL_PATH = {
    "type": "string",
    "maxLength": MAX_PATH_BYTES,
    "pattern": (
        r"^(?![/\\])(?![A-Za-z]:)(?!(.*[/\\])?\.\.([/\\]|$))"
        rf"([^/\\\u0000]{{0,255}}[/\\])*(?!\.$){_SEGMENT}$"
    ),
}


def plan_components() -> dict[str, dict[str, Any]]:
    """JSON schemas of a plan (`Plan`, its steps and configs) from the rules of `dag.plan`.
    What a schema cannot say (dependencies name existing steps, no cycles,
    unique names, distinct export paths) `dag` still checks: a 400 with field paths."""
    step_name = {"type": "string", "pattern": f"^{rules.STEP_NAME_RE.pattern}$"}
    retry = closed(
        {"max_attempts": {"type": "integer", "minimum": 1, "maximum": rules.MAX_ATTEMPTS}}, []
    )
    variants = {
        "ingest": ("source", _ingest_configs()),
        "transform": ("op", _transform_ops()),
        "export": ("target", _export_configs()),
    }
    components = _table_export_shapes(variants["export"][1])
    configs = {}
    for kind, (field, by_value) in variants.items():
        names = {value: f"{_camel(value)}{kind.capitalize()}Config" for value in by_value}
        components.update({names[value]: schema for value, schema in by_value.items()})
        configs[kind] = {
            "oneOf": [ref(name) for name in names.values()],
            "discriminator": {
                "propertyName": field,
                "mapping": {value: ref(name)["$ref"] for value, name in names.items()},
            },
        }
    steps = {}
    for kind in rules.STEP_TYPES:
        depends_on = {"type": "array", "uniqueItems": True, "items": step_name}
        depends_on.update({"maxItems": 0} if kind == "ingest" else {"minItems": 1})
        steps[f"{kind.capitalize()}Step"] = closed(
            {
                "name": step_name,
                "type": enum([kind]),
                "config": configs[kind],
                "depends_on": depends_on,
                "retry": retry,
                "checks": ref("Checks"),
            },
            ["name", "type", "config"],
        )
    plan = closed(
        {
            "on_failure": enum(rules.ON_FAILURE_POLICIES),
            "on_row_error": enum(rules.ON_ROW_ERROR_MODES),
            "params": _params(),
            "steps": {
                "type": "array",
                "minItems": rules.MIN_STEPS,
                "maxItems": rules.MAX_STEPS,
                "items": {"oneOf": [ref(name) for name in steps]},
            },
        },
        ["steps"],
    )
    plan["description"] = (
        "A DAG of steps (docs/plan-format.md). Beyond this schema the API checks that dependencies"
        " name other steps of the plan, without cycles, that step names are unique and that"
        " file exports do not write the same path or under one another (400)."
    )
    return {"Plan": plan, **steps, **components}


def _table_export_shapes(by_target: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The two shapes of a table export, taken out of `by_target`: components of their own
    (`AppendTableExportConfig`, `MergeTableExportConfig`), not discriminator values."""
    return {f"{v}ExportConfig": by_target.pop(v) for v in ("AppendTable", "MergeTable")}


def _params() -> dict[str, Any]:
    """A plan's run parameters (`dag.params`): a name that is no built-in, its type and a
    default of that type."""
    defaults = {
        "int": {"type": "integer", "minimum": rules.INT64_MIN, "maximum": rules.INT64_MAX},
        "date": {"type": "string", "format": "date"},
        "string": {"type": "string", "maxLength": params.MAX_STRING_CHARS, "pattern": NO_NUL},
    }
    return {
        "type": "object",
        "maxProperties": params.MAX_PARAMS,
        "propertyNames": {
            "pattern": f"^{params.PARAM_NAME_RE.pattern}$",
            "not": enum(params.BUILTIN_PARAMS),
        },
        "additionalProperties": {
            "oneOf": [
                closed({"type": enum([kind]), "default": defaults[kind]}, ["type"])
                for kind in params.PARAM_TYPES
            ]
        },
        "description": "run parameters, used as {NAME} in the templated fields",
    }


def _camel(value: str) -> str:
    """`normalize_whitespace` -> `NormalizeWhitespace`."""
    return "".join(part.capitalize() for part in value.split("_"))


def _ingest_configs() -> dict[str, dict[str, Any]]:
    """A file ingest (a delimiter only with the csv format, the default) or a table's, by
    `source`."""
    columns = {
        "type": "object",
        "propertyNames": {"minLength": 1, "pattern": NO_NUL},
        "additionalProperties": enum(rules.COLUMN_TYPES),
    }
    delimiter = {"type": "string", "minLength": 1, "maxLength": 1, "not": enum(['"', "\r", "\n"])}
    file_ingest = closed(
        {
            "source": enum(["file"]),
            "path": _REL_PATH,
            "format": enum(rules.INGEST_FORMATS),
            "columns": columns,
            "delimiter": delimiter,
            "null_values": {
                "type": "array",
                "maxItems": MAX_NULL_VALUES,
                "uniqueItems": True,
                "items": {"type": "string", "maxLength": MAX_NULL_VALUE_CHARS, "pattern": NO_NUL},
            },
            "encoding": enum(ENCODINGS),
            "quote": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1,
                "pattern": "^[\\x01-\\x7f]$",
                "not": enum(["\r", "\n"]),
                "description": (
                    "the quote character; default '\"'. It must differ from the delimiter"
                    " (',' when none is given): a plan where they are the same is refused"
                    " (400 invalid_plan, field config.quote)"
                ),
            },
            "on_schema_change": enum(SCHEMA_CHANGES),
        },
        ["source", "path"],
    )
    # A delimiter or quote only with the csv format (in a form that keeps the config one
    # typed model).
    csv_only = {"properties": {"format": enum(["csv"])}}
    file_ingest["dependentSchemas"] = {"delimiter": csv_only, "quote": csv_only}
    table_ingest = closed(
        {"source": enum(["table"]), "table": NAME, "cursor": NAME}, ["source", "table"]
    )
    return {"file": file_ingest, "table": table_ingest}


def _transform_ops() -> dict[str, dict[str, Any]]:
    """Each transform op's config, by `op`, from its schema in the registry (`dag.ops`)."""
    return {
        name: closed({"op": enum([name]), **op.properties}, ["op", *op.required])
        for name, op in OPS.items()
    }


def _export_configs() -> dict[str, dict[str, Any]]:
    """A file export or a sandbox table export, by `target`."""
    table = {"type": "string", "pattern": f"^{rules.EXPORT_TABLE_RE.pattern}$"}
    file_export = closed(
        {"target": enum(["file"]), "path": _REL_PATH, "format": enum(rules.EXPORT_FORMATS)},
        ["target", "path"],
    )
    common = {"target": enum(["table"]), "table": table, "key": NAME}
    deleted = {
        **NAME,
        "description": "the column whose non-null value deletes the record's key from the"
        " table (not the key column)",
    }
    append = closed({**common, "mode": enum(["append"])}, ["target", "table"])
    append["description"] = "one copy per run, keyed (run_id, step_id, record_key) (default)"
    merge = closed(
        {**common, "mode": enum(["merge"]), "deleted": deleted}, ["target", "table", "key", "mode"]
    )
    merge["description"] = (
        "one row per record_key across runs: the last succeeded run's values and"
        " run_id/step_id (docs/plan-format.md)"
    )
    return {
        "file": file_export,
        "table": {"anyOf": [ref("AppendTableExportConfig"), ref("MergeTableExportConfig")]},
        "AppendTable": append,
        "MergeTable": merge,
    }
