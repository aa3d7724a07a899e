"""What a previewed export would write, shown and never written (each target's view is in its
module of `actors.targets`): a file export's path, columns and first lines; a table export's
target and first staged rows, screened as staging screens them (bad values, null and
repeated keys, keys of earlier batches). Its rows keep no long value
(`actors.preview_bounds.kept`), and a file export's text shows each value over 200
characters cut to its first 16 characters and its length (`"<16 characters>… [truncated: N
chars]"`, short enough for the answer to show it whole): the text of 5 rows of a 50 MiB
value is not written out only to be cut in the answer. Here: what the views share."""

from __future__ import annotations

from typing import Any

from actors.preview_bounds import Cut, clip
from dag.types import COLUMN_TYPES

PREVIEW_RUN_ID = "00000000-0000-0000-0000-000000000000"  # stands for the run's id in paths
SAMPLE_ROWS = 5
TEXT_VALUE_CHARS = 16  # of a long value in a file export's text

# The OpenAPI document's shapes of a sample's rows and of a step's columns.
PREVIEW_ROWS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "maxItems": SAMPLE_ROWS,
    "items": {"type": "object", "additionalProperties": {"type": ["integer", "string", "null"]}},
}
COLUMN_TYPES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"type": "string", "enum": list(COLUMN_TYPES)},
}


def shown(row: dict[str, Any]) -> dict[str, Any]:
    """A kept row as a file export's text shows it: each `Cut` value cut to
    `TEXT_VALUE_CHARS`, with its length."""
    return {k: clip(v, TEXT_VALUE_CHARS) if isinstance(v, Cut) else v for k, v in row.items()}
