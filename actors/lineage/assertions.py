"""A step's data check results (`dag.checks`, kept in `step_runs.checks`) as OpenLineage's
standard data-quality assertions facet (`dataQualityAssertions`,
DataQualityAssertionsDatasetFacet 1-1-0).

The facet is an input dataset facet: it describes tests run on a dataset that a job read.
The checks of a step read the step's output (the records it would publish) before anything
of it is published, as a check task reads the table it checks; so a step's COMPLETE or FAIL
event lists that dataset among its inputs too, carrying the assertions (docs/lineage.md,
"Data checks"). Plain values in, a facet out: nothing here reads a database."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from openlineage.client.facet_v2 import data_quality_assertions_dataset as dqa

__all__ = ["FACET", "assertions_facet"]

FACET = "dataQualityAssertions"
# A result's keys that are not the check's own (its parameters).
_RESULT_KEYS = ("check", "severity", "outcome", "failing", "examples", "message")


def assertions_facet(
    results: Sequence[Mapping[str, Any]], producer: str
) -> dqa.DataQualityAssertionsDatasetFacet | None:
    """One assertion per check result, in plan order (None without any result)."""
    if not results:
        return None
    return dqa.DataQualityAssertionsDatasetFacet(
        assertions=[_assertion(r) for r in results], producer=producer
    )


def _assertion(result: Mapping[str, Any]) -> dqa.Assertion:
    """`assertion`: the kind; `success`: it found nothing (a warned check did find some);
    `column` when it reads one column; the check's own keys in `params` and, as JSON, in
    `content`."""
    params = {k: v for k, v in result.items() if k not in _RESULT_KEYS}
    columns = params.get("columns") or ([params["column"]] if "column" in params else [])
    failing = int(result.get("failing") or 0)
    return dqa.Assertion(
        assertion=str(result["check"]),
        success=result.get("outcome") == "passed",
        column=columns[0] if len(columns) == 1 else None,
        severity=str(result.get("severity", "error")),
        name=_name(result["check"], params),
        description=str(result.get("message", "")),
        expected=_expected(params),
        actual=_actual(result, failing),
        contentType="json",
        content=json.dumps(params, ensure_ascii=False, sort_keys=True, default=str),
        params={**params, "failing": failing},
    )


def _name(kind: str, params: Mapping[str, Any]) -> str:
    """`unique(id)`, `range(amount)`, `row_count`: the check and what it reads."""
    columns = params.get("columns") or ([params["column"]] if "column" in params else [])
    return f"{kind}({', '.join(columns)})" if columns else kind


def _expected(params: Mapping[str, Any]) -> str | None:
    bounds = {k: params[k] for k in ("min", "max", "ratio", "values") if k in params}
    return json.dumps(bounds, ensure_ascii=False, default=str) if bounds else None


def _actual(result: Mapping[str, Any], failing: int) -> str | None:
    """The failing records; for `row_count` and `max_reject_ratio` the count or ratio out of
    bounds (None when it was within them: the result does not keep it)."""
    if result["check"] in ("row_count", "max_reject_ratio"):
        return str(result["examples"][0]) if result.get("examples") else None
    return str(failing)
