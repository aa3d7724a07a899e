"""Step config validation: the `config` object of an ingest, transform or export step,
checked field by field against the rules of docs/plan-format.md (every problem a `FieldError`
at its path), and its documented defaults made explicit for `parse_plan`.

The field checkers (`dag.fieldchecks`) append to the caller's error list rather than raise,
so one pass reports every problem. A config is checked by its registry entry: a transform's
by its op (`dag.ops`), an ingest's by its source (`dag.sources`), an export's by its target
(`dag.targets`). Shape only, no I/O: paths are checked as relative paths (`dag.paths`), the
connectors guard the file system itself."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from dag.errors import FieldError
from dag.fieldchecks import check_choice, check_keys, quoted
from dag.ops import OPS
from dag.sources import SOURCES
from dag.sources.file import INGEST_FORMATS, MAX_NULL_VALUE_CHARS, MAX_NULL_VALUES
from dag.targets import TARGETS
from dag.targets.file import EXPORT_FORMATS
from dag.targets.table import EXPORT_MODES, EXPORT_TABLE_RE

__all__ = [
    "EXPORT_FORMATS",
    "EXPORT_MODES",
    "EXPORT_TABLE_RE",
    "EXPORT_TARGETS",
    "INGEST_FORMATS",
    "INGEST_SOURCES",
    "MAX_NULL_VALUES",
    "MAX_NULL_VALUE_CHARS",
    "TRANSFORM_OPS",
    "validate_config",
    "with_defaults",
]

INGEST_SOURCES = tuple(SOURCES)
EXPORT_TARGETS = tuple(TARGETS)
TRANSFORM_OPS = tuple(OPS)


def _validate_ingest(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    source = config.get("source")
    if not check_choice(source, INGEST_SOURCES, f"{path}.source", errors, "source" in config):
        return
    check_keys(config, SOURCES[source].keys, path, errors)
    SOURCES[source].validate(config, path, errors)


def _validate_transform(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    op = config.get("op")
    if "op" not in config:
        errors.append(FieldError(f"{path}.op", "is required"))
        return
    if not isinstance(op, str) or op not in OPS:
        errors.append(
            FieldError(f"{path}.op", f"unknown op {op!r}; expected one of {quoted(TRANSFORM_OPS)}")
        )
        return
    check_keys(config, OPS[op].keys, path, errors)
    OPS[op].validate(config, path, errors)


def _validate_export(config: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    target = config.get("target")
    if not check_choice(target, EXPORT_TARGETS, f"{path}.target", errors, "target" in config):
        return
    check_keys(config, TARGETS[target].keys, path, errors)
    TARGETS[target].validate(config, path, errors)


_CONFIG_VALIDATORS = {
    "ingest": _validate_ingest,
    "transform": _validate_transform,
    "export": _validate_export,
}


def validate_config(
    step_type: str, config: Mapping[str, Any], path: str, errors: list[FieldError]
) -> None:
    """Append to `errors` every problem of the config object of a step of `step_type`
    (one of `plan.STEP_TYPES`), each with a field path under `path`."""
    _CONFIG_VALIDATORS[step_type](config, path, errors)


def with_defaults(step_type: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a valid config with its documented defaults made explicit."""
    filled = copy.deepcopy(dict(config))
    if step_type == "ingest":
        SOURCES[filled["source"]].defaults(filled)
    elif step_type == "export":
        TARGETS[filled["target"]].defaults(filled)
    return filled
