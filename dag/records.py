"""The values that flow through the core: raw records, batches, positions, row errors."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

T = TypeVar("T")


@dataclass(frozen=True)
class RowError:
    """A bad record: where it is, which column, why, and the raw record as read."""

    reason: str
    line: int | None = None  # physical line of the record's start in the source file
    record: int | None = None  # 1-based ordinal in the step's input
    column: str | None = None
    raw: Any = None

    def as_dict(self) -> dict[str, Any]:
        """The reject-file line (JSON object) for this error."""
        return {
            "line": self.line,
            "record": self.record,
            "column": self.column,
            "reason": self.reason,
            "raw": self.raw,
        }


@dataclass(frozen=True)
class Position:
    """Where reading resumes: a byte offset and the physical line number found there."""

    offset: int = 0
    line: int = 1

    def as_dict(self) -> dict[str, int]:
        return {"offset": self.offset, "line": self.line}

    @classmethod
    def from_dict(cls, data: dict[str, int] | None) -> Position:
        if not data:
            return cls()
        return cls(offset=int(data["offset"]), line=int(data["line"]))


@dataclass(frozen=True)
class RawRecord:
    """One logical input record: its first physical line and its untyped values."""

    line: int
    values: dict[str, Any]


class BuiltOnUse(Sequence[T]):
    """A batch held a column at a time that is a sequence of records for any other reader:
    the records are built on first use (`_built`), once. `ColumnRecords` (raw records as
    read) and `dag.Columns` (typed records) are the two."""

    __slots__ = ()

    @abstractmethod
    def _built(self) -> list[T]:
        """The records, built on the first call and the same list after."""

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index):
        return self._built()[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self._built())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class ColumnRecords(BuiltOnUse[RawRecord]):
    """The good records of a batch read a column at a time (`dag.csvparts`: records one per
    line from `first_line` on, or starting at `first_lines`): their values by column, in
    header order, null as None. The batch-level steps (null markers, inference, typing) work on
    the columns; anything else sees a sequence of `RawRecord`s, built on first use."""

    def __init__(
        self,
        header: Sequence[str],
        columns: list[list[Any]],
        first_line: int,
        first_lines: list[int] | None = None,
    ):
        self.header = list(header)
        self.columns = columns
        self.first_line = first_line
        self._first_lines = first_lines  # each record's first line, when not one per line
        self._records: list[RawRecord] | None = None
        self._length = len(columns[0]) if columns else 0

    def column(self, name: str) -> list[Any]:
        """The values of column `name`, in record order (mutable: null markers go in place)."""
        return self.columns[self.header.index(name)]

    def lines(self) -> Sequence[int]:
        """The first line of each record, in record order."""
        if self._first_lines is not None:
            return self._first_lines
        return range(self.first_line, self.first_line + self._length)

    @property
    def built(self) -> bool:
        """True once the records were built (a change to the columns no longer shows)."""
        return self._records is not None

    def _built(self) -> list[RawRecord]:
        if self._records is None:
            header = self.header
            self._records = [
                RawRecord(line, dict(zip(header, row, strict=True)))
                for line, row in zip(self.lines(), zip(*self.columns, strict=True), strict=True)
            ]
        return self._records

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"ColumnRecords({len(self)} records from line {self.first_line})"


@dataclass
class RawBatch:
    """Up to `batch_size` input records (good ones and row errors) and where the next starts."""

    records: Sequence[RawRecord]
    row_errors: list[RowError]
    end: Position
    header: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Input records consumed by this batch, good and bad."""
        return len(self.records) + len(self.row_errors)

    def head(self, n: int) -> tuple[list[RawRecord], list[RowError]]:
        """The batch's first `n` input records in file order (by line), good and malformed,
        as (records, row errors); a preview reads a run's input up to there."""
        if n >= self.size:
            return list(self.records), list(self.row_errors)
        items = sorted(
            [(r.line, 0, i) for i, r in enumerate(self.records)]
            + [(e.line or 0, 1, i) for i, e in enumerate(self.row_errors)]
        )[: max(n, 0)]
        keep_records = sorted(i for _, kind, i in items if kind == 0)
        keep_errors = sorted(i for _, kind, i in items if kind == 1)
        return [self.records[i] for i in keep_records], [self.row_errors[i] for i in keep_errors]
