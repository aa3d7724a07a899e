"""Named SQL queries: a `.sql` file of `-- name --` blocks loaded once into a dict."""

from __future__ import annotations

import re
from pathlib import Path

_HEADER = re.compile(r"^-- ([a-z_][a-z0-9_]*) --\s*$", re.MULTILINE)


def load_queries(path: Path) -> dict[str, str]:
    """Parse `path` into {name: sql}. Each block starts with `-- name --` and a one-line
    purpose comment; names are unique and every block holds a statement."""
    text = path.read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sql = body.strip()
        if name in queries:
            raise ValueError(f"{path}: query {name!r} defined twice")
        if not any(ln.strip() and not ln.strip().startswith("--") for ln in sql.splitlines()):
            raise ValueError(f"{path}: query {name!r} is empty")
        queries[name] = sql
    return queries
