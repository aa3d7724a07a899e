"""`table`: an export to the sandbox table `sandbox.<table>`, staged per run and step and
published when the step commits. `mode` `append` (the default) keeps one copy per run, keyed
(run_id, step_id, record_key); `merge` keeps one row per `key` across runs, and a non-null
`deleted` column deletes its key. A preview warns about null and repeated keys."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from dag.errors import FieldError
from dag.fieldchecks import check_choice, require_str
from dag.ops.schema import NAME, closed, component, one_of
from dag.preview_warning import PreviewWarning
from dag.targets.target import Config, ExportTarget
from dag.types import show_value

EXPORT_MODES = ("append", "merge")
# Export tables become unquoted identifiers in `sandbox.NAME`.
EXPORT_TABLE_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_EXAMPLES = 3  # repeated keys a warning names


def _validate(config: Config, path: str, errors: list[FieldError]) -> None:
    table = require_str(config, "table", path, errors)
    if table is not None and not EXPORT_TABLE_RE.fullmatch(table):
        errors.append(
            FieldError(
                f"{path}.table",
                "must be 1-63 characters of lowercase letters, digits and '_', "
                "not starting with a digit",
            )
        )
    if "key" in config:
        require_str(config, "key", path, errors)
    mode = config.get("mode", "append")
    merge = check_choice(mode, EXPORT_MODES, f"{path}.mode", errors) and mode == "merge"
    if merge and "key" not in config:
        errors.append(FieldError(f"{path}.key", 'required with "mode": "merge" (one row per key)'))
    if "deleted" in config:
        _check_deleted(config, path, errors, merge)


def _check_deleted(config: Config, path: str, errors: list[FieldError], merge: bool) -> None:
    """A merge export's `deleted`: the column whose non-null value deletes the key."""
    deleted = require_str(config, "deleted", path, errors)
    if deleted is None:
        return
    if not merge:
        errors.append(FieldError(f"{path}.deleted", 'only with "mode": "merge"'))
    elif deleted == config.get("key"):
        errors.append(FieldError(f"{path}.deleted", "must not be the key column"))


def _shapes() -> dict[str, dict[str, Any]]:
    """The two shapes of a table export, components of their own (not discriminator
    values): `AppendTableExportConfig` and `MergeTableExportConfig`."""
    table = {"type": "string", "pattern": f"^{EXPORT_TABLE_RE.pattern}$"}
    common = {"target": one_of(["table"]), "table": table, "key": NAME}
    deleted = {
        **NAME,
        "description": "the column whose non-null value deletes the record's key from the"
        " table (not the key column)",
    }
    append = closed({**common, "mode": one_of(["append"])}, ["target", "table"])
    append["description"] = "one copy per run, keyed (run_id, step_id, record_key) (default)"
    merge = closed(
        {**common, "mode": one_of(["merge"]), "deleted": deleted},
        ["target", "table", "key", "mode"],
    )
    merge["description"] = (
        "one row per record_key across runs: the last succeeded run's values and"
        " run_id/step_id (docs/plan-format.md)"
    )
    return {"AppendTableExportConfig": append, "MergeTableExportConfig": merge}


def _key_warnings(config: Config, inputs: Sequence[Mapping[str, Any]]) -> list[PreviewWarning]:
    """`export_key_nulls` / `export_key_duplicates`: a key column that is null, or repeats a
    value, in the records the export would write (each such record is a row error)."""
    key = config.get("key")
    if not key:
        return []
    warnings = []
    nulls = sum(1 for r in inputs if r.get(key) is None)
    if nulls:
        warnings.append(
            PreviewWarning(
                "export_key_nulls",
                f"key column {key!r} is null in {nulls} of {len(inputs)} record(s): "
                "each is a row error",
            )
        )
    counts = Counter(str(r[key]) for r in inputs if r.get(key) is not None)
    repeated = {k: c for k, c in counts.items() if c > 1}
    if repeated:
        examples = ", ".join(show_value(k) for k in list(repeated)[:_EXAMPLES])
        extra = sum(c - 1 for c in repeated.values())
        warnings.append(
            PreviewWarning(
                "export_key_duplicates",
                f"key column {key!r} repeats {len(repeated)} value(s) (e.g. {examples}): "
                f"{extra} record(s) would be row errors",
            )
        )
    return warnings


_SHAPES = _shapes()
TABLE = ExportTarget(
    "table",
    ("target", "table", "key", "mode", "deleted"),
    _validate,
    {"anyOf": [component(name) for name in _SHAPES]},
    components=_SHAPES,
    stages_rows=True,
    preview_warnings=_key_warnings,
)
TARGETS = (TABLE,)
