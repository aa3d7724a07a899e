"""The pure core: plan validation and ordering, readiness under the failure policy, retry
decisions, CSV/JSON batching, column types, transforms and digests. No I/O of its own."""

from dag.checks import MAX_EXAMPLES, Checker, failed_errors, key_digests
from dag.csvparts import read_csv_batches
from dag.digest import DIGEST_SEED, chain_bytes, chain_rows, encode_rows
from dag.errors import (
    CheckFailed,
    ConfigValueError,
    CsvFormatError,
    DagError,
    FieldError,
    InputDataError,
    Int64OverflowError,
    PlanInvalid,
    RowValueError,
)
from dag.fusion import fusion_group, replay_chain
from dag.inference import ColumnInference, infer_columns
from dag.jsonparts import read_json_batches, read_jsonl_batches
from dag.limits import (
    BATCH_SIZE,
    GLOBAL_ACTIVE_LIMIT,
    INT64_MAX,
    INT64_MIN,
    MAX_SOURCE_BYTES,
    PIPELINE_ACTIVE_LIMIT,
    PIPELINE_QUEUE_LIMIT,
    PIPELINE_RUNNING_LIMIT,
    RETRY_DELAYS_S,
)
from dag.paths import relative_path_problem, split_relative_path
from dag.plan import Plan, Step, parse_plan, topological_order, validate_plan
from dag.preview import PreviewWarning, step_warnings
from dag.readiness import Readiness, decide, steps_to_rerun
from dag.records import Position, RawBatch, RawRecord, RowError
from dag.retry import RetryDecision, decide_retry, is_input_data_error
from dag.states import (
    RUN_ACTIVE,
    RUN_FINAL,
    RUN_TERMINAL,
    STEP_TERMINAL,
    AttemptOutcome,
    RunStatus,
    SkipReason,
    StepStatus,
)
from dag.transforms import Transform, build_transform
from dag.types import COLUMN_TYPES, ISO_DATE_TEXT, null_out, type_records

__all__ = [
    "BATCH_SIZE",
    "COLUMN_TYPES",
    "DIGEST_SEED",
    "GLOBAL_ACTIVE_LIMIT",
    "INT64_MAX",
    "INT64_MIN",
    "ISO_DATE_TEXT",
    "MAX_EXAMPLES",
    "MAX_SOURCE_BYTES",
    "PIPELINE_ACTIVE_LIMIT",
    "PIPELINE_QUEUE_LIMIT",
    "PIPELINE_RUNNING_LIMIT",
    "RETRY_DELAYS_S",
    "RUN_ACTIVE",
    "RUN_FINAL",
    "RUN_TERMINAL",
    "STEP_TERMINAL",
    "AttemptOutcome",
    "CheckFailed",
    "Checker",
    "ColumnInference",
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
    "RunStatus",
    "SkipReason",
    "Step",
    "StepStatus",
    "Transform",
    "build_transform",
    "chain_bytes",
    "chain_rows",
    "decide",
    "decide_retry",
    "encode_rows",
    "failed_errors",
    "fusion_group",
    "infer_columns",
    "is_input_data_error",
    "key_digests",
    "null_out",
    "parse_plan",
    "read_csv_batches",
    "read_json_batches",
    "read_jsonl_batches",
    "relative_path_problem",
    "replay_chain",
    "split_relative_path",
    "step_warnings",
    "steps_to_rerun",
    "topological_order",
    "type_records",
    "validate_plan",
]
