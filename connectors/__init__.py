"""Data in and out: file sources behind the path guard, sandbox tables (ingest and staged
export), and attempt-safe export and reject files."""

from connectors.dirmarks import directory_mark
from connectors.errors import (
    ChunkMissing,
    ConnectorError,
    ExportPathRefused,
    SourceMissing,
    SourceRefused,
    SourceTooLarge,
    SourceUndecodable,
    StagedOutputLost,
    StagingLost,
    TableConflict,
    TableRefused,
)
from connectors.export_columns import check_export_columns
from connectors.export_encoding import duplicate_key_error, screen_export_batch
from connectors.export_modes import EXPORT_MODES
from connectors.fileexport import (
    ChunkedFile,
    count_records,
    encode_csv,
    encode_jsonl,
    encode_rejects,
    export_file,
    reject_file,
)
from connectors.files import check_rel_path, expand_source, open_source
from connectors.http_answers import MAX_HTTP_ANSWER_BYTES, BoundedAnswers, bounded_session
from connectors.merge_undo import settle_merge
from connectors.published_rows import count_run_rows, withdraw_run_rows
from connectors.rejects import RejectPreview, read_rejects
from connectors.sandbox import SANDBOX_SCHEMA, check_table_name
from connectors.table_cursor import CursorWindow, cursor_type, fix_cursor_range
from connectors.table_export import TableExport, drop_staging
from connectors.table_source import (
    SourceTable,
    map_column_type,
    read_table_batches,
    resolve_source_table,
)
from connectors.transcode import decoded_source

__all__ = [
    "EXPORT_MODES",
    "MAX_HTTP_ANSWER_BYTES",
    "SANDBOX_SCHEMA",
    "BoundedAnswers",
    "ChunkMissing",
    "ChunkedFile",
    "ConnectorError",
    "CursorWindow",
    "ExportPathRefused",
    "RejectPreview",
    "SourceMissing",
    "SourceRefused",
    "SourceTable",
    "SourceTooLarge",
    "SourceUndecodable",
    "StagedOutputLost",
    "StagingLost",
    "TableConflict",
    "TableExport",
    "TableRefused",
    "bounded_session",
    "check_export_columns",
    "check_rel_path",
    "check_table_name",
    "count_records",
    "count_run_rows",
    "cursor_type",
    "decoded_source",
    "directory_mark",
    "drop_staging",
    "duplicate_key_error",
    "encode_csv",
    "encode_jsonl",
    "encode_rejects",
    "expand_source",
    "export_file",
    "fix_cursor_range",
    "map_column_type",
    "open_source",
    "read_rejects",
    "read_table_batches",
    "reject_file",
    "resolve_source_table",
    "screen_export_batch",
    "settle_merge",
    "withdraw_run_rows",
]
