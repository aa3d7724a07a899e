"""What a step's parts exchange: its input batches (`InputBatch`, what a source yields), what
it may touch (`StepEnv`) and the interface of an export's sink (`Sink`), which every export
target's sink has (`actors.targets`) and the batch pass calls (`actors.memberpass`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from actors.committer import StagedRows
from dag import RowError


@dataclass
class InputBatch:
    """One input batch: typed records (a `dag.Columns` as typing gives them, read by column
    up to the exports: `docs/decisions.md`, "Typed batches kept by column to the exports"),
    the row errors found reading it, its size and the position to resume after it, and
    what its input digest covers: the raw bytes of a file ingest, else the records
    (`digest_records`), else nothing (the step takes its input digest from its one
    upstream step). `rows` are the records' `dag.encode_rows` bytes in
    the source's column order when the source read them in that form (a stored batch)."""

    records: Sequence[dict]
    row_errors: list[RowError]
    records_in: int
    position: dict[str, Any]
    digest_records: bool = False
    raw_bytes: bytes | None = None
    rows: bytes | None = None
    lines: Sequence[int] | None = None  # a file's: where each of `records` starts
    file: str | None = None  # a glob ingest's: the file of `records`, as `paths` names it


@dataclass
class StepEnv:
    """What a step may touch besides its own state: directories and connections."""

    run_id: str
    data_dir: Path
    export_dir: Path
    reject_dir: Path
    state_conn: Any
    sandbox_connect: Callable[[], Any]
    upstream: dict[str, tuple[dict[str, str], int]] = field(default_factory=dict)


class Sink(Protocol):
    """An export step's external output, written batch by batch in an idempotent, invisible
    form and published when the step commits. `stages_in_commit`: whether `defer` may hand
    a batch's rows to the batch's commit instead of `write` writing them."""

    stages_in_commit: ClassVar[bool]

    def start(self, *, fresh: bool, chunks: int = 0, records: int = 0) -> None:
        """Begin an attempt: from scratch, or after `chunks` committed chunks (batches) of
        `records` records."""

    def defer(self, chunk: int, records: list[dict], first_ordinal: int) -> StagedRows | None:
        """Batch `chunk`'s rows to go in the batch's commit, or None: `write` writes it."""

    def write(self, chunk: int, records: list[dict], first_ordinal: int) -> list[RowError]:
        """Write batch `chunk` (invisible until `publish`); the records it refuses."""

    def discard(self) -> None:
        """Remove what was written and never published."""

    def publish(self, chunks: int, records: int) -> str:
        """Publish the `chunks` committed batches, exactly `records` records; where to."""

    def close(self) -> None:
        """Release what the sink holds (a connection)."""
