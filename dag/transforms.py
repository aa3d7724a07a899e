"""The fixed set of record transforms, applied one batch at a time.

`build_transform(config, input_columns)` checks the config against the input columns
(a column that is not there, a filter literal that does not fit the column type, an
aggregate over a non-int column raise `ConfigValueError`) and returns a `Transform`:

- `output_columns`: the ordered column types of its output;
- `apply(records, first_ordinal) -> (records, row_errors)`: one batch in, never mutating
  it; `records[i]` has ordinal `first_ordinal + i` in the step's input. A `dag.Columns`
  whose records were not built goes a column at a time and gives a `Columns` (no dict per
  record; `dag.ops.columnar`), with the records and row errors a list of the same records
  gives;
- `state()` / `restore(state, parts)`: a JSON-able state for the checkpoint (`None` for
  every transform but `aggregate`); `checkpoint()`: the state for a batch's checkpoint and
  the part of it to store with that batch (`aggregate`: see `dag.ops.aggregate`);
- `finish()`: records only known at the end of the input (`aggregate`; else none).

Ops (docs/plan-format.md has the config shapes): one module each in `dag.ops`, whose
docstring says what the op does (`dag.ops.whitespace`: `trim`, `normalize_whitespace`;
`dag.ops.map`, `dag.ops.filter_eq`, `dag.ops.parse_date`, `dag.ops.aggregate`).
"""

from __future__ import annotations

from dag.ops import build_transform
from dag.ops.aggregate import AGGREGATE_OUTPUTS
from dag.ops.transform import Transform

__all__ = ["AGGREGATE_OUTPUTS", "Transform", "build_transform"]
