"""Data checks on a step's output: the registry of check kinds, their validation at save
time and their evaluation over the whole output, batch by batch.

A step's `checks` is a list of objects, each `{"check": KIND, ...}` with the keys of its
kind (below) and an optional `"severity": "error" | "warn"` (default `error`). Each kind is
one class of this module, listed in `CHECK_KINDS`: its keys, its validation and its
per-batch counting. Nothing here does I/O: `unique` gives each batch's key digests
(`key_digests`) and takes the duplicates back from the caller (`actors.checks` keeps them in
PostgreSQL, so no step holds more than one batch of keys in memory).

Evaluation: `Checker.observe` counts each output batch; its `state` goes into the step's
checkpoint and `restore` takes it back, so a resumed attempt counts on from where the
committed batches left off. `Checker.results` gives one result per check, in plan order:
`{"check", "severity", "outcome": "passed" | "failed" | "warned", "failing", "examples",
"message", ...}` (the check's own keys too). A failed `error` check fails the step.

An example of a record-level check (`not_null`, `accepted_values`, `range`) says where the
record is and what it holds: `{"record": N, "line": L, "values": {...}}` (N: its ordinal in
the step's output; L: the physical line of its start in the input file, for a file ingest
only, after `"file": F`, the file's path relative to the data directory, for a glob
ingest), with `"null": [columns]` (`not_null`) or `"value": V` (the others); `values`
holds the checked columns and the first others, 20 in all, text cut at 200 characters. A
`unique` example is a repeated key: `{"key": [...], "records": COUNT, "first_record": N,
"first_file": F, "first_line": L}` (a key longer than 200 characters as the string of its
text cut there; `first_file` for a glob ingest)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from dag.columns import column_values, record_at
from dag.errors import ConfigValueError, FieldError

__all__ = [
    "CHECK_KINDS",
    "MAX_EXAMPLES",
    "SEVERITIES",
    "Checker",
    "failed_errors",
    "key_digests",
    "locator",
    "validate_checks",
]

SEVERITIES = ("error", "warn")
MAX_CHECKS = 32
MAX_EXAMPLES = 5
MAX_SHOWN_CHARS = 200
MAX_SHOWN_COLUMNS = 20
PASSED, FAILED, WARNED = "passed", "failed", "warned"
Locator = Callable[[int], dict[str, int]]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _comparable(value: Any) -> Any:
    """A value in an order that ints, strings and ISO dates share with their kind."""
    return value.isoformat() if hasattr(value, "isoformat") else value


class _Kind:
    """One check kind: its keys besides `check` and `severity`, and its counting."""

    name: ClassVar[str]
    keys: ClassVar[tuple[str, ...]]
    required: ClassVar[tuple[str, ...]]

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.spec = dict(spec)
        self.failing = 0
        self.examples: list[Any] = []

    @classmethod
    def validate(cls, spec: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
        """Problems of the kind's own keys (presence is checked by `validate_checks`)."""

    def columns(self) -> list[str]:
        """The columns the check reads (each must be in the step's output)."""
        return []

    def observe(self, records: Sequence[Mapping[str, Any]], at: Locator) -> None:
        """Count one output batch (`at(i)`: where its `i`-th record is)."""

    def note(self, record: Mapping[str, Any], at: Locator, i: int, **said: Any) -> None:
        """One failing record: counted, and kept as an example while there are few."""
        self.failing += 1
        if len(self.examples) < MAX_EXAMPLES:
            values = _shown(record, self.columns())
            self.examples.append({**at(i), **said, "values": values})

    def message(self) -> str:
        return f"{self.failing} record(s) fail"


def _validate_columns(value: Any, path: str, errors: list[FieldError]) -> None:
    if not isinstance(value, list | tuple) or not value:
        errors.append(FieldError(path, "must be a non-empty list of column names"))
        return
    for k, item in enumerate(value):
        if not isinstance(item, str) or not item:
            errors.append(FieldError(f"{path}[{k}]", "must be a non-empty string"))
    if len({c for c in value if isinstance(c, str)}) != len(value):
        errors.append(FieldError(path, "names a column twice"))


def _validate_column(spec: Mapping[str, Any], path: str, errors: list[FieldError]) -> None:
    if not isinstance(spec.get("column"), str) or not spec["column"]:
        errors.append(FieldError(f"{path}.column", "must be a non-empty string"))


class NotNull(_Kind):
    """Every record has a value in each of `columns`."""

    name, keys, required = "not_null", ("columns",), ("columns",)

    @classmethod
    def validate(cls, spec, path, errors) -> None:
        _validate_columns(spec["columns"], f"{path}.columns", errors)

    def columns(self) -> list[str]:
        return list(self.spec["columns"])

    def observe(self, records, at) -> None:
        names = self.spec["columns"]
        by_column = column_values(records, names)  # of a Columns: no record built
        failing = sorted({i for c in by_column if None in c for i, v in enumerate(c) if v is None})
        for i in failing:
            empty = [n for n, c in zip(names, by_column, strict=True) if c[i] is None]
            self.note(record_at(records, i), at, i, null=empty)

    def message(self) -> str:
        return f"{self.failing} record(s) have a null in {', '.join(self.spec['columns'])}"


class Unique(_Kind):
    """No two records share the values of `columns` (over the whole output); the caller
    finds the duplicates from `key_digests` and hands them to `duplicates`."""

    name, keys, required = "unique", ("columns",), ("columns",)

    @classmethod
    def validate(cls, spec, path, errors) -> None:
        _validate_columns(spec["columns"], f"{path}.columns", errors)

    def columns(self) -> list[str]:
        return list(self.spec["columns"])

    def duplicates(self, count: int, examples: list[Any]) -> None:
        """`count` records repeat a key seen before; `examples`: some repeated keys."""
        self.failing = count
        self.examples = examples[:MAX_EXAMPLES]

    def message(self) -> str:
        return f"{self.failing} record(s) repeat a key of {', '.join(self.spec['columns'])}"


class AcceptedValues(_Kind):
    """Every non-null value of `column` is one of `values`."""

    name, keys, required = "accepted_values", ("column", "values"), ("column", "values")

    @classmethod
    def validate(cls, spec, path, errors) -> None:
        _validate_column(spec, path, errors)
        values = spec["values"]
        if not isinstance(values, list) or not values:
            errors.append(FieldError(f"{path}.values", "must be a non-empty list"))
        elif not all(v is None or isinstance(v, str) or _is_number(v) for v in values):
            errors.append(FieldError(f"{path}.values", "must hold strings, numbers or null"))

    def columns(self) -> list[str]:
        return [self.spec["column"]]

    def observe(self, records, at) -> None:
        column = self.spec["column"]
        accepted = {str(_comparable(v)) for v in self.spec["values"] if v is not None}
        for i, value in enumerate(column_values(records, [column])[0]):
            if value is not None and str(_comparable(value)) not in accepted:
                self.note(record_at(records, i), at, i, value=_cut(_comparable(value)))

    def message(self) -> str:
        return f"{self.failing} value(s) of {self.spec['column']} are not accepted"


class Range(_Kind):
    """Every non-null value of `column` is at least `min` and at most `max` (numbers for
    an int column, ISO date strings for a date column, strings in code point order)."""

    name, keys, required = "range", ("column", "min", "max"), ("column",)

    @classmethod
    def validate(cls, spec, path, errors) -> None:
        _validate_column(spec, path, errors)
        bounds = [k for k in ("min", "max") if k in spec]
        if not bounds:
            errors.append(FieldError(path, "needs 'min', 'max' or both"))
        for k in bounds:
            if not (_is_number(spec[k]) or isinstance(spec[k], str)):
                errors.append(FieldError(f"{path}.{k}", "must be a number or a string"))

    def columns(self) -> list[str]:
        return [self.spec["column"]]

    def observe(self, records, at) -> None:
        column, low, high = self.spec["column"], self.spec.get("min"), self.spec.get("max")
        for i, value in enumerate(column_values(records, [column])[0]):
            if value is None:
                continue
            value = _comparable(value)
            try:
                out = (low is not None and value < low) or (high is not None and value > high)
            except TypeError:
                raise ConfigValueError(
                    f"range check on {column!r}: {value!r} cannot be compared with its bounds",
                    column=column,
                ) from None
            if out:
                self.note(record_at(records, i), at, i, value=_cut(value))

    def message(self) -> str:
        bounds = [f"{k} {self.spec[k]!r}" for k in ("min", "max") if k in self.spec]
        return f"{self.failing} value(s) of {self.spec['column']} are outside {', '.join(bounds)}"


class RowCount(_Kind):
    """The step outputs at least `min` and at most `max` records."""

    name, keys, required = "row_count", ("min", "max"), ()

    @classmethod
    def validate(cls, spec, path, errors) -> None:
        bounds = [k for k in ("min", "max") if k in spec]
        if not bounds:
            errors.append(FieldError(path, "needs 'min', 'max' or both"))
        for k in bounds:
            if not _is_int(spec[k]) or spec[k] < 0:
                errors.append(FieldError(f"{path}.{k}", "must be a non-negative integer"))

    def settle(self, records_in: int, records_out: int, rejected: int) -> None:
        low, high = self.spec.get("min"), self.spec.get("max")
        if (low is not None and records_out < low) or (high is not None and records_out > high):
            self.failing, self.examples = 1, [records_out]

    def message(self) -> str:
        return f"{self.examples[0]} record(s) out of bounds"


class MaxRejectRatio(_Kind):
    """At most `ratio` (0..1) of the step's input records are rejected."""

    name, keys, required = "max_reject_ratio", ("ratio",), ("ratio",)

    @classmethod
    def validate(cls, spec, path, errors) -> None:
        ratio = spec["ratio"]
        if not _is_number(ratio) or not 0 <= ratio <= 1:
            errors.append(FieldError(f"{path}.ratio", "must be a number from 0 to 1"))

    def settle(self, records_in: int, records_out: int, rejected: int) -> None:
        ratio = rejected / records_in if records_in else 0.0
        if ratio > self.spec["ratio"]:
            self.failing, self.examples = rejected, [round(ratio, 6)]

    def message(self) -> str:
        return f"{self.failing} record(s) rejected, a ratio of {self.examples[0]}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _cut(value: Any) -> Any:
    """A value as an example shows it: text cut at `MAX_SHOWN_CHARS` characters."""
    if isinstance(value, str) and len(value) > MAX_SHOWN_CHARS:
        return value[:MAX_SHOWN_CHARS] + "…"
    return value


def _shown(record: Mapping[str, Any], checked: Sequence[str]) -> dict[str, Any]:
    """A record as an example shows it: the checked columns and the first others, up to
    `MAX_SHOWN_COLUMNS` in all, in the record's order, text cut (a checkpoint holds it)."""
    names = list(record)
    if len(names) > MAX_SHOWN_COLUMNS:
        kept = set(checked)
        kept.update(n for n in names if n not in kept and len(kept) < MAX_SHOWN_COLUMNS)
        names = [n for n in names if n in kept]
    return {k: _cut(_comparable(record[k])) for k in names}


def locator(first: int, lines: Sequence[int] | None = None, file: str | None = None) -> Locator:
    """Where the `i`-th record of a batch is: its ordinal in the step's output (`first` for
    the batch's first) and, with `lines` (a file ingest's), the line of its start, after
    the `file` it is in (a glob ingest's, relative to the data directory)."""
    if lines is None:
        return lambda i: {"record": first + i}
    if file is None:
        return lambda i: {"record": first + i, "line": lines[i]}
    return lambda i: {"record": first + i, "file": file, "line": lines[i]}


CHECK_KINDS: dict[str, type[_Kind]] = {
    k.name: k for k in (NotNull, Unique, AcceptedValues, Range, RowCount, MaxRejectRatio)
}


def validate_checks(value: Any, path: str, errors: list[FieldError]) -> None:
    """Append every problem of a step's `checks` list, each at its field path."""
    if not isinstance(value, list | tuple):
        errors.append(FieldError(path, "must be a list of checks"))
        return
    if len(value) > MAX_CHECKS:
        errors.append(FieldError(path, f"at most {MAX_CHECKS} checks, got {len(value)}"))
    for i, spec in enumerate(value):
        item = f"{path}[{i}]"
        if not isinstance(spec, Mapping):
            errors.append(FieldError(item, "must be an object"))
            continue
        kind = CHECK_KINDS.get(spec.get("check")) if isinstance(spec.get("check"), str) else None
        if kind is None:
            choices = ", ".join(repr(k) for k in CHECK_KINDS)
            errors.append(FieldError(f"{item}.check", f"must be one of {choices}"))
            continue
        allowed = ("check", "severity", *kind.keys)
        unknown = [k for k in spec if k not in allowed]
        for key in unknown:
            allowed_text = ", ".join(repr(a) for a in allowed)
            errors.append(FieldError(f"{item}.{key}", f"unknown key; allowed: {allowed_text}"))
        missing = [k for k in kind.required if k not in spec]
        for key in missing:
            errors.append(FieldError(f"{item}.{key}", "is required"))
        if "severity" in spec and spec["severity"] not in SEVERITIES:
            errors.append(FieldError(f"{item}.severity", "must be one of 'error', 'warn'"))
        if not missing:
            kind.validate(spec, item, errors)


def key_digests(
    records: Sequence[Mapping[str, Any]], columns: Sequence[str]
) -> tuple[list[int], list[str]]:
    """For each record: a signed 64-bit digest of its values of `columns` (of their JSON
    array), and that array as JSON text; a key longer than `MAX_SHOWN_CHARS` characters is
    shown as a JSON string of its first ones."""
    by_column = column_values(records, list(columns))  # of a Columns: no record built
    if len(columns) == 1:
        keys = [f"[{_key_value(v)}]" for v in by_column[0]]
    else:
        keys = [f"[{', '.join(map(_key_value, row))}]" for row in zip(*by_column, strict=True)]
    hashes = [
        int.from_bytes(hashlib.blake2b(k.encode(), digest_size=8).digest(), "big", signed=True)
        for k in keys
    ]
    return hashes, [k if len(k) <= MAX_SHOWN_CHARS else _cut_key(k) for k in keys]


def _cut_key(key: str) -> str:
    """A key too long to show: its JSON text cut, as a JSON string."""
    return _encode_text(key[:MAX_SHOWN_CHARS] + "…")


_encode_text = json.encoder.encode_basestring  # as json.dumps(ensure_ascii=False) writes text
_encode = json.JSONEncoder(ensure_ascii=False).encode


def _key_value(value: Any) -> str:
    """One value of a key as JSON (what `json.dumps` writes, without its per-call cost)."""
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is str:
        return _encode_text(value)
    if value is None:
        return "null"
    return _encode(_comparable(value))


class Checker:
    """A step's checks over its output (see the module)."""

    def __init__(self, specs: Sequence[Mapping[str, Any]]) -> None:
        self.kinds = [CHECK_KINDS[s["check"]](s) for s in specs]

    def require(self, columns: Mapping[str, str]) -> None:
        """Fail (`ConfigValueError`) when a check names a column the output lacks."""
        for kind in self.kinds:
            for column in kind.columns():
                if column not in columns:
                    raise ConfigValueError(
                        f"{kind.name} check: column {column!r} is not in the step's output "
                        f"({', '.join(columns)})",
                        column=column,
                    )

    def unique_checks(self) -> list[tuple[int, Unique]]:
        """The `unique` checks with their index in the step's checks."""
        return [(i, k) for i, k in enumerate(self.kinds) if isinstance(k, Unique)]

    def observe(
        self,
        records: Sequence[Mapping[str, Any]],
        first: int = 1,
        lines: Sequence[int] | None = None,
        file: str | None = None,
    ) -> None:
        """Count one output batch whose first record is the `first`-th of the output;
        `lines`: where each record starts in the input file (a file ingest), `file`: that
        file (a glob ingest's)."""
        at = locator(first, lines, file)
        for kind in self.kinds:
            kind.observe(records, at)

    def state(self) -> list[list[Any]]:
        return [[k.failing, k.examples] for k in self.kinds]

    def restore(self, state: Sequence[Sequence[Any]] | None) -> None:
        for kind, (failing, examples) in zip(self.kinds, state or (), strict=False):
            kind.failing, kind.examples = failing, list(examples)

    def results(self, records_in: int, records_out: int, rejected: int) -> list[dict[str, Any]]:
        """One result per check, in plan order (see the module)."""
        results = []
        for kind in self.kinds:
            settle = getattr(kind, "settle", None)
            if settle is not None:
                settle(records_in, records_out, rejected)
            severity = kind.spec.get("severity", "error")
            outcome = PASSED if not kind.failing else (FAILED if severity == "error" else WARNED)
            result = {**kind.spec, "severity": severity, "outcome": outcome}
            result["failing"] = kind.failing
            result["examples"] = kind.examples
            result["message"] = "passed" if not kind.failing else kind.message()
            results.append(result)
        return results


def failed_errors(results: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The results that fail the step."""
    return [r for r in results if r["outcome"] == FAILED]
