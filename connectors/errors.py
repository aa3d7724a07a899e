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


class StagedOutputLost(ConnectorError):
    """Batches an export step committed are gone from its stage, or its publish would make
    a different number of records visible than the step committed: the step starts over
    (never a partial publish)."""


class ChunkMissing(StagedOutputLost):
    """A committed chunk of a staged file is gone: publishing would leave a hole."""


class StagingLost(StagedOutputLost):
    """The staging table of a table export lost rows of committed batches (dropped, or
    rows deleted) before they were published."""


class TableRefused(ConnectorError, InputDataError):
    """A sandbox table name is refused: not a plain name, not an ordinary table in `sandbox`,
    or a source table without a primary key."""


class TableConflict(TableRefused):
    """An existing export table does not fit the step's columns (type, key, not-null)."""


class SourceUndecodable(ConnectorError, InputDataError):
    """An ingest file holds bytes its declared `encoding` cannot decode."""
