"""`etl validate PLAN.json [--param NAME=VALUE ...]`: a plan checked offline, without a
database, and with `--param` the run's values too (typed, substituted, paths checked), as a
trigger would bind them (`bind_values`, shared with `etl preview`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dag import ParamsInvalid, resolve_plan, resolve_values
from dag.plan import parse_plan, topological_order
from service.client.params import add_param_option, parse_params
from service.plandoc import read_plan_document

OFFLINE_RUN_ID = "offline"  # the `run_id` of a plan bound outside a run


def configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PLAN.json", type=Path)
    add_param_option(parser)


def bind_values(plan: Any, pairs: list[str]) -> tuple[Any, list[tuple[str, str]]]:
    """`plan` with the `--param` values of `pairs` substituted, as a trigger would (with
    `run_id` `offline`), or the problems (`params.NAME`, message). A plan without
    parameters and no `--param` comes back as it is."""
    if not pairs and not plan.get("params"):
        return plan, []
    try:
        given = parse_params(pairs, plan)
        values = resolve_values(plan, given, {"run_id": OFFLINE_RUN_ID})
        return resolve_plan(plan, values), []
    except ValueError as exc:
        return plan, [("param", str(exc))]
    except ParamsInvalid as exc:
        return plan, [(e.field, e.message) for e in exc.errors]


def run_validate(args: argparse.Namespace) -> int:
    """Validate a plan offline: a `{"name", "plan"}` document or a bare plan object. Exit 0
    with `ok: N steps: a -> b -> c` (execution order), 1 with one `field: message` line
    per problem, or 2 when the file cannot be read as JSON (as `etl pipelines apply` and
    `etl preview`)."""
    doc = read_plan_document(args.path)
    if doc.unreadable is not None:
        print(f"etl: {args.path}: {doc.unreadable}", file=sys.stderr)
        return 2
    if doc.problems:
        for field, message in doc.problems:
            print(f"{field}: {message}")
        return 1
    plan, problems = bind_values(doc.plan, args.param)
    if problems and args.param:
        for field, message in problems:
            print(f"{field}: {message}")
        return 1
    order = topological_order(parse_plan(plan))
    print(f"ok: {len(order)} steps: {' -> '.join(order)}")
    return 0
