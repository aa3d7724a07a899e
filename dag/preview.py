"""The pure part of a plan preview: the warnings a person wants to see before saving a plan
(why an inferred column has its type is `dag.inference`). Plain values in, plain values out.

Warnings (`Warning.code`), each judged on the previewed sample only:

- `map_all_default`: a `map` with a `default` where every input value was unmapped, so
  every record got the default (`map_no_match`: the same without a `default`, every value
  passed unchanged);
- `filter_kept_none`: a `filter_eq` that kept none of its input records;
- `aggregate_all_null`: an `aggregate` whose column is null in every input record;
- an export's, by its target (`dag.targets`): `export_key_nulls` / `export_key_duplicates`,
  a table export whose key column is null, or repeats a value, in the records it would
  write (each such record is a row error);
- `parse_date_mostly_failed`: a `parse_date` that failed on more than half its input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dag.preview_warning import PreviewWarning
from dag.targets import target_of

__all__ = ["PreviewWarning", "step_warnings"]


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
    if step_type == "export":
        return target_of(config).preview_warnings(config, inputs)
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
