"""`table`: an ingest of the sandbox table `table`, read-only in primary-key order; with a
`cursor` column, each run reads only the rows past the mark the last succeeded run left
(an incremental ingest)."""

from __future__ import annotations

from dag.errors import FieldError
from dag.fieldchecks import require_str
from dag.ops.schema import NAME, closed, one_of
from dag.sources.source import Config, IngestSource


def _validate(config: Config, path: str, errors: list[FieldError]) -> None:
    require_str(config, "table", path, errors)
    if "cursor" in config:
        require_str(config, "cursor", path, errors)


def _cursor(config: Config) -> tuple[str, str] | None:
    return (config["table"], config["cursor"]) if "cursor" in config else None


TABLE = IngestSource(
    "table",
    ("source", "table", "cursor"),
    _validate,
    closed({"source": one_of(["table"]), "table": NAME, "cursor": NAME}, ["source", "table"]),
    cursor=_cursor,
)
SOURCES = (TABLE,)
