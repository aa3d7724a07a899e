"""`file`: an export to a file under the export directory (`path`, relative) in the `jsonl`
(the default) or `csv` format, published whole when the step commits."""

from __future__ import annotations

from typing import Any

from dag.errors import FieldError
from dag.fieldchecks import check_choice, check_path_key
from dag.ops.schema import closed, one_of
from dag.paths import REL_PATH_SCHEMA
from dag.targets.target import Config, ExportTarget

EXPORT_FORMATS = ("jsonl", "csv")


def _validate(config: Config, path: str, errors: list[FieldError]) -> None:
    check_path_key(config, path, errors)
    check_choice(config.get("format", "jsonl"), EXPORT_FORMATS, f"{path}.format", errors)


def _defaults(config: dict[str, Any]) -> None:
    config.setdefault("format", "jsonl")


FILE = ExportTarget(
    "file",
    ("target", "path", "format"),
    _validate,
    closed(
        {"target": one_of(["file"]), "path": REL_PATH_SCHEMA, "format": one_of(EXPORT_FORMATS)},
        ["target", "path"],
    ),
    defaults=_defaults,
    path_key="path",
)
TARGETS = (FILE,)
