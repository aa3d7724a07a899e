"""The plan's JSON schemas in the OpenAPI document (`Plan`, its steps and configs), built from
the rules of `dag.plan` and the schemas of the registries (transform ops `dag.ops`, ingest
sources `dag.sources`, export targets `dag.targets`) so that the document and the validator
cannot disagree on a name, a type or a limit. What a schema cannot say, `dag` still checks
(a 400 with field paths)."""

from __future__ import annotations

from typing import Any

from dag import params
from dag import plan as rules
from dag.ops import OPS
from dag.sources import SOURCES
from dag.targets import TARGETS
from service.api.openapi.shapes import NO_NUL, closed, enum, ref


def plan_components() -> dict[str, dict[str, Any]]:
    """JSON schemas of a plan (`Plan`, its steps and configs) from the rules of `dag.plan`.
    What a schema cannot say (dependencies name existing steps, no cycles,
    unique names, distinct export paths) `dag` still checks: a 400 with field paths."""
    step_name = {"type": "string", "pattern": f"^{rules.STEP_NAME_RE.pattern}$"}
    retry = closed(
        {"max_attempts": {"type": "integer", "minimum": 1, "maximum": rules.MAX_ATTEMPTS}}, []
    )
    components, configs = _configs()
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


def _configs() -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The config components (each op's, source's and target's, and what a target's schema
    refers to, first in the document) and each step type's config, a `oneOf` of them with
    its discriminator."""
    variants = {
        "ingest": ("source", {name: source.schema for name, source in SOURCES.items()}),
        "transform": ("op", _transform_ops()),
        "export": ("target", {name: target.schema for name, target in TARGETS.items()}),
    }
    components = {k: v for target in TARGETS.values() for k, v in target.components.items()}
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
    return components, configs


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


def _transform_ops() -> dict[str, dict[str, Any]]:
    """Each transform op's config, by `op`, from its schema in the registry (`dag.ops`)."""
    return {
        name: closed({"op": enum([name]), **op.properties}, ["op", *op.required])
        for name, op in OPS.items()
    }
