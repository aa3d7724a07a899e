"""The pure part of a plan preview: why an undeclared column got its inferred type, and the
warnings a person wants to see before saving a plan. Plain values in, plain values out.

Warnings (`Warning.code`), each judged on the previewed sample only:

- `map_all_default`: a `map` with a `default` where every input value was unmapped, so
  every record got the default (`map_no_match`: the same without a `default`, every value
  passed unchanged);
- `filter_kept_none`: a `filter_eq` that kept none of its input records;
- `aggregate_all_null`: an `aggregate` whose column is null in every input record;
- `export_key_nulls` / `export_key_duplicates`: a table export whose key column is null, or
  repeats a value, in the records it would write (each such record is a row error);
- `parse_date_mostly_failed`: a `parse_date` that failed on more than half its input.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dag.records import RawRecord
from dag.types import convert_value, show_value

__all__ = ["PreviewWarning", "inference_evidence", "step_warnings"]

_EXAMPLES = 3


@dataclass(frozen=True)
class PreviewWarning:
    """Something in a step's sample that is probably not what the plan's author meant."""

    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


def _fails(value: Any, column_type: str) -> bool:
    try:
        convert_value(value, column_type)
    except ValueError:
        return True
    return False


def inference_evidence(
    columns: Mapping[str, str], declared: Mapping[str, str], records: Sequence[RawRecord]
) -> dict[str, str]:
    """For every undeclared column of `columns`, the evidence for its type among `records`
    (the raw records inference looked at: a run's first batch), in column order."""
    evidence: dict[str, str] = {}
    seen = f"the first {len(records)} record(s)"
    for name, column_type in columns.items():
        if name in declared:
            continue
        values = [(r.line, r.values.get(name)) for r in records]
        present = [(line, v) for line, v in values if v is not None and v != ""]
        if not present:
            evidence[name] = f"no value in {seen}: string by default"
            continue
        examples = ", ".join(show_value(v) for _, v in present[:_EXAMPLES])
        if column_type == "int":
            evidence[name] = f"all {len(present)} value(s) in {seen} are int64, e.g. {examples}"
            continue
        not_int = next((lv for lv in present if _fails(lv[1], "int")), None)
        if column_type == "date":
            but = (
                f"; line {not_int[0]}: {show_value(not_int[1])} is not an int64" if not_int else ""
            )
            evidence[name] = (
                f"all {len(present)} value(s) in {seen} are ISO dates, e.g. {examples}{but}"
            )
            continue
        not_date = next((lv for lv in present if _fails(lv[1], "date")), None)
        if not_int is not None and not_int == not_date:
            shown = show_value(not_int[1])
            evidence[name] = f"line {not_int[0]}: {shown} is neither an int64 nor a date"
        else:
            parts = []
            if not_int is not None:
                parts.append(f"line {not_int[0]}: {show_value(not_int[1])} is not an int64")
            if not_date is not None:
                parts.append(f"line {not_date[0]}: {show_value(not_date[1])} is not an ISO date")
            evidence[name] = "; ".join(parts) or f"{examples} read as text"
    return evidence


def _map_key(value: Any) -> Any:
    """The mapping key a value is looked up by (`dag.transforms`: ints by their text)."""
    return str(value) if type(value) is int else value


def step_warnings(
    step_type: str,
    config: Mapping[str, Any],
    inputs: Sequence[Mapping[str, Any]],
    outputs: Sequence[Mapping[str, Any]],
    rejected: int,
) -> list[PreviewWarning]:
    """The warnings of one step from its sample: `inputs` (the records it received),
    `outputs` (the records it produced) and `rejected` (its row errors)."""
    if not inputs:
        return []
    if step_type == "transform":
        return _transform_warnings(config, inputs, outputs, rejected)
    if step_type == "export" and config.get("target") == "table" and config.get("key"):
        return _key_warnings(config["key"], inputs)
    return []


def _transform_warnings(
    config: Mapping[str, Any],
    inputs: Sequence[Mapping[str, Any]],
    outputs: Sequence[Mapping[str, Any]],
    rejected: int,
) -> list[PreviewWarning]:
    """The warnings of a transform step, by its op (`inputs` is not empty)."""
    op, n = config.get("op"), len(inputs)
    if op == "map":
        return _map_warnings(config, inputs)
    if op == "filter_eq" and not outputs:
        message = (
            f"kept 0 of {n} record(s): no {config.get('column')!r} equals {config.get('value')!r}"
        )
        return [PreviewWarning("filter_kept_none", message)]
    if op == "aggregate" and all(r.get(config.get("column")) is None for r in inputs):
        message = (
            f"{config.get('column')!r} is null in all {n} record(s): sum is 0, min and max are null"
        )
        return [PreviewWarning("aggregate_all_null", message)]
    if op == "parse_date" and rejected * 2 > n:
        message = (
            f"{config.get('column')!r} failed to parse as a date in {rejected} of {n} record(s)"
        )
        return [PreviewWarning("parse_date_mostly_failed", message)]
    return []


def _map_warnings(
    config: Mapping[str, Any], inputs: Sequence[Mapping[str, Any]]
) -> list[PreviewWarning]:
    """A `map` whose sample matched no mapping key: every value fell to the default, or
    (without one) passed unchanged."""
    n = len(inputs)
    column, mapping = config.get("column"), config.get("mapping") or {}
    unmapped = sum(1 for r in inputs if _map_key(r.get(column)) not in mapping)
    if unmapped != n:
        return []
    if "default" in config:
        message = (
            f"every one of the {n} value(s) of {column!r} fell to the default "
            f"{config['default']!r}: no value matched a mapping key"
        )
        return [PreviewWarning("map_all_default", message)]
    message = (
        f"none of the {n} value(s) of {column!r} matched a mapping key: "
        "every value passed unchanged"
    )
    return [PreviewWarning("map_no_match", message)]


def _key_warnings(key: str, inputs: Sequence[Mapping[str, Any]]) -> list[PreviewWarning]:
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
