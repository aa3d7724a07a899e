"""Errors of the connectors.

Refusals (a path, a file or a table the step may not use) subclass `dag.InputDataError`
as well as `ConnectorError`: retrying cannot help, so the step fails at once. Everything else
(`OSError`, driver errors) is left as it is and stays retryable."""

from __future__ import annotations

from dag.errors import InputDataError


class ConnectorError(Exception):
    """Base class of every error raised by `connectors`."""


class SourceRefused(ConnectorError, InputDataError):
    """An ingest path is refused: absolute, `..`, outside the data directory, not a file."""


class SourceMissing(SourceRefused):
    """An ingest path names no file inside the data directory."""


class SourceTooLarge(SourceRefused):
    """An ingest file is larger than the size cap."""


class ExportPathRefused(ConnectorError, InputDataError):
    """An export path (or step name, run id) would leave the run's export directory."""


class ChunkMissing(ConnectorError):
    """A committed chunk of a staged file is gone: publishing would leave a hole."""


class TableRefused(ConnectorError, InputDataError):
    """A sandbox table name is refused: not a plain name, not an ordinary table in `sandbox`,
    or a source table without a primary key."""


class TableConflict(TableRefused):
    """An existing export table does not fit the step's columns (type, key, not-null)."""
