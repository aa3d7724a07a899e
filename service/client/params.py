"""`--param NAME=VALUE` of `etl run` (and the values of `etl backfill`): text from the
command line typed by the pipeline's declarations (`plan.params`), so that `--param n=5`
sends the integer 5 to an `int` parameter and the text "5" to a `string` one. The server
checks the values; this only picks their JSON type."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any


def add_param_option(parser: argparse.ArgumentParser) -> None:
    """`--param NAME=VALUE`, repeatable."""
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a run parameter's value (repeatable); the plan declares its type",
    )


def parse_params(pairs: Iterable[str], plan: Mapping[str, Any]) -> dict[str, Any]:
    """`{"NAME": value}` of `NAME=VALUE` pairs, typed by `plan`'s declarations; ValueError
    for a pair without `=` or a name given twice."""
    values: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--param {pair!r}: expected NAME=VALUE")
        if name in values:
            raise ValueError(f"--param {name}: given twice")
        values[name] = typed_value(plan, name, text)
    return values


def typed_value(plan: Mapping[str, Any], name: str, text: str) -> Any:
    """`text` as the JSON value of parameter `name`: an int for an `int` parameter when it
    reads as one (else the text, for the server to refuse by name)."""
    declared = plan.get("params") if isinstance(plan, Mapping) else None
    spec = declared.get(name) if isinstance(declared, Mapping) else None
    if isinstance(spec, Mapping) and spec.get("type") == "int":
        try:
            return int(text)
        except ValueError:
            return text
    return text


def params_text(params: Mapping[str, Any]) -> str:
    """`day=2026-12-01 region=north`: a run's values on one line, `run_id` left out."""
    return " ".join(f"{k}={v}" for k, v in params.items() if k != "run_id")
