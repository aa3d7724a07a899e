"""Errors of the core. `InputDataError` and its family are final (never retried)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One validation problem: the field path (`plan.steps[0].name`) and what is wrong."""

    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        """The `details[]` item of an API error."""
        return {"field": self.field, "message": self.message}


class DagError(Exception):
    """Base class of every error raised by `dag`."""


class PlanInvalid(DagError):
    """A plan failed validation; `errors` holds every problem with its field path."""

    def __init__(self, errors: list[FieldError]):
        self.errors = list(errors)
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in self.errors))


class InputDataError(DagError):
    """The input data is bad: retrying cannot help, so the step fails at once."""

    def __init__(self, message: str, *, line: int | None = None, column: str | None = None):
        self.line = line
        self.column = column
        where = []
        if line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column {column!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
        self.reason = message


class CsvFormatError(InputDataError):
    """Malformed CSV: unterminated quote, wrong field count, invalid UTF-8."""


class RowValueError(InputDataError):
    """A value failed its column type or a transform (a row error in `stop` mode)."""


class Int64OverflowError(InputDataError):
    """A value or an aggregate sum left the int64 range."""


class ConfigValueError(InputDataError):
    """A step config that is valid on its own but does not fit the data (e.g. a column)."""

    @classmethod
    def missing_column(cls, text: str, name: str, columns: Iterable[str]) -> ConfigValueError:
        """`text` (saying column `name` is missing), then the columns there are and the
        nearest of them: a typo is told what it missed."""
        columns = list(columns)
        text += f"; its columns: {', '.join(columns)}" if columns else "; it has no columns"
        near = difflib.get_close_matches(name, columns, n=1)
        return cls(text + (f" (did you mean {near[0]!r}?)" if near else ""), column=name)


class CheckFailed(InputDataError):
    """A data check of severity `error` failed on a step's output: nothing of it is
    published (`dag.checks`)."""
