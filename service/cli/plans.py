"""`etl validate PLAN.json`: a plan checked offline, without a database."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dag.plan import parse_plan, topological_order
from service.plandoc import read_plan_document


def configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PLAN.json", type=Path)


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
    order = topological_order(parse_plan(doc.plan))
    print(f"ok: {len(order)} steps: {' -> '.join(order)}")
    return 0
