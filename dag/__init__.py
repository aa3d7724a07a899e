"""The pure core: plan validation and ordering, readiness under the failure policy, retry
decisions, CSV/JSON batching, column types, transforms and digests. No I/O of its own."""

from dag.csvparts import read_csv_batches
from dag.digest import DIGEST_SEED, chain_bytes, chain_digest
from dag.errors import (
    ConfigValueError,
    CsvFormatError,
    DagError,
    InputDataError,
    Int64OverflowError,
    PlanInvalid,
    RowValueError,
)
from dag.jsonparts import read_json_batches, read_jsonl_batches
from dag.plan import FieldError, Plan, Step, parse_plan, topological_order, validate_plan
from dag.preview import PreviewWarning, inference_evidence, step_warnings
from dag.readiness import Readiness, decide, steps_to_rerun
from dag.records import Position, RawBatch, RawRecord, RowError
from dag.retry import RETRY_DELAYS_S, RetryDecision, decide_retry, is_input_data_error
from dag.transforms import Transform, build_transform
from dag.types import COLUMN_TYPES, infer_columns, type_records

__all__ = [
    "COLUMN_TYPES",
    "DIGEST_SEED",
    "RETRY_DELAYS_S",
    "ConfigValueError",
    "CsvFormatError",
    "DagError",
    "FieldError",
    "InputDataError",
    "Int64OverflowError",
    "Plan",
    "PlanInvalid",
    "Position",
    "PreviewWarning",
    "RawBatch",
    "RawRecord",
    "Readiness",
    "RetryDecision",
    "RowError",
    "RowValueError",
    "Step",
    "Transform",
    "build_transform",
    "chain_bytes",
    "chain_digest",
    "decide",
    "decide_retry",
    "infer_columns",
    "inference_evidence",
    "is_input_data_error",
    "parse_plan",
    "read_csv_batches",
    "read_json_batches",
    "read_jsonl_batches",
    "step_warnings",
    "steps_to_rerun",
    "topological_order",
    "type_records",
    "validate_plan",
]
