"""A plan document as the CLI reads it: a `{"name", "plan"}` file (what `POST /pipelines`
takes) or a bare plan object, checked the way `etl validate` reports it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dag.plan import validate_plan


@dataclass(frozen=True)
class PlanDocument:
    """The plan object of a file and every problem found, as `(field, message)`;
    `unreadable` says why a file could not be read as JSON at all."""

    plan: Any
    problems: list[tuple[str, str]] = field(default_factory=list)
    unreadable: str | None = None


def read_plan_document(path: Path) -> PlanDocument:
    """The plan in `path` and its problems (an unreadable or non-JSON file is one problem,
    named by the file); no problems means the plan is valid."""
    try:
        doc: Any = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return PlanDocument(None, [(str(path), str(exc))], unreadable=str(exc))
    problems: list[tuple[str, str]] = []
    plan = doc
    if isinstance(doc, dict) and "plan" in doc and "steps" not in doc:
        plan = doc["plan"]
        name = doc.get("name")
        if not isinstance(name, str) or not name:
            problems.append(("name", "must be a non-empty string"))
        problems += [(k, "unknown field") for k in doc if k not in ("name", "plan")]
    problems += [(e.field, e.message) for e in validate_plan(plan)]
    return PlanDocument(plan, problems)
