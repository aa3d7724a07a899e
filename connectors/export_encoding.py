"""The table export's batch encoding, without a database: a batch of typed records as the
CSV that COPY reads into staging, each line the record's column values, its record key and
(on the fast path) the batch seq.

Two ways there:
- `encode_batch`, the fast path for the common case (typed records from the core with usable
  distinct keys): whole columns at a time, exactly as `csv.writer` (QUOTE_NONNUMERIC, null as
  a bare `nan`) writes them, values unchecked (COPY refuses one that does not fit);
- `screen_export_batch`, record by record: every value checked against its column type, the
  records that cannot be staged reported as row errors (a value that does not fit, a null
  key, a key repeated in the batch). The export falls back to it, and a preview calls it.

A record key is the key column's value as text, or the record's ordinal without a key
column."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterable, Mapping
from typing import Any

from dag.columns import INT_OR_NULL, TEXT_OR_NULL, column_values
from dag.limits import INT64_MAX, INT64_MIN
from dag.records import RowError
from dag.types import ISO_DATE_TEXT

# How the fast path writes null: QUOTE_NONNUMERIC quotes every string and leaves numbers bare,
# so a NaN comes out as a bare `nan`, which COPY reads as NULL (`copy_batch_typed`); a text
# value "nan" is quoted and stays text. The core never produces floats of its own.
_NULL = float("nan")
_NULL_FIELD = str(_NULL)  # as csv.writer writes it: bare


def encode_batch(
    columns: Iterable[str],
    key_column: str | None,
    records: list[Mapping[str, Any]],
    first_ordinal: int,
    seq: int | None,
) -> tuple[io.StringIO, list[str]] | None:
    """The fast path: the whole batch (records with ordinals `first_ordinal`, ...) encoded as
    `csv.writer` (QUOTE_NONNUMERIC) writes it, a column at a time (`_encode_column`) or, for
    a column of other values, by `csv.writer` itself, without checking values one by one
    (COPY refuses a value that does not fit, and the caller then takes the per-record path),
    with `seq` as the last field of every line unless it is None; and the record keys, in
    record order. None when a key is null or repeated in the batch."""
    keys = record_keys(key_column, records, first_ordinal)
    if keys is None:
        return None
    values = column_values(records, list(columns))
    fields = [_encode_column(column) for column in [*values, keys]]
    if None not in fields:
        if seq is not None:
            fields.append([str(seq)] * len(records))
        lines = [*map(",".join, zip(*fields, strict=True)), ""]
        return io.StringIO("\n".join(lines)), keys
    buf = io.StringIO()
    writer = csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
    tail = [] if seq is None else [seq]
    writer.writerows(
        [*[_NULL if v is None else v for v in row], key, *tail]
        for *row, key in zip(*values, keys, strict=True)
    )
    return buf, keys


def record_keys(
    key_column: str | None, records: list[Mapping[str, Any]], first_ordinal: int
) -> list[str] | None:
    """The record keys of a batch (records with ordinals `first_ordinal`, ...), in record
    order; None when a key is null or repeated in the batch."""
    if key_column is None:
        return [str(first_ordinal + i) for i in range(len(records))]
    (raw,) = column_values(records, [key_column])  # of a Columns: no record built
    if None in raw:
        return None
    keys = [str(k) for k in raw]
    return keys if len(set(keys)) == len(keys) else None


def screen_export_batch(
    columns: Mapping[str, str],
    key_column: str | None,
    records: list[Mapping[str, Any]],
    first_ordinal: int,
) -> tuple[dict[str, tuple[int, Mapping[str, Any], str]], list[RowError]]:
    """One export batch before staging, without a database: the records it can stage by
    record key, as (ordinal, record, CSV fields), and the row errors of the others (a value
    that does not fit its column, a null key, a key repeated in the batch), in record order.
    The export and a preview both call it; only staging finds keys of earlier batches."""
    errors: list[RowError] = []
    staged: dict[str, tuple[int, Mapping[str, Any], str]] = {}
    for i, record in enumerate(records):
        ordinal = first_ordinal + i
        fields, problem = _encode_fields(columns, record)
        if problem is not None:
            errors.append(RowError(problem[1], record=ordinal, column=problem[0], raw=record))
            continue
        record_key = _record_key(key_column, record, ordinal)
        if record_key is None:
            reason = f"key column {key_column!r} is null"
            errors.append(RowError(reason, record=ordinal, column=key_column, raw=record))
            continue
        if record_key in staged:
            first = staged[record_key][0]
            errors.append(duplicate_key_error(key_column, record_key, ordinal, record, first))
            continue
        staged[record_key] = (ordinal, record, fields)
    return staged, errors


def duplicate_key_error(
    key_column: str | None,
    record_key: str,
    ordinal: int,
    record: Mapping[str, Any],
    first: int | None,
) -> RowError:
    """The row error of a record whose key record `first` of the batch (None: an earlier
    batch) already took."""
    where = f"record {first}" if first is not None else "an earlier batch"
    return RowError(
        f"duplicate key {record_key!r} in column {key_column!r}: already exported by "
        f"{where} of this step",
        record=ordinal,
        column=key_column,
        raw=record,
    )


def csv_text(value: str) -> str:
    """`value` as one CSV field of the per-record path."""
    # Always quoted: an unquoted empty field is NULL in COPY's CSV format, a quoted one is ''.
    return '"' + value.replace('"', '""') + '"'


def _record_key(key_column: str | None, record: Mapping[str, Any], ordinal: int) -> str | None:
    if key_column is None:
        return str(ordinal)
    value = record.get(key_column)
    return None if value is None else str(value)


def _encode_fields(
    columns: Mapping[str, str], record: Mapping[str, Any]
) -> tuple[str, None] | tuple[None, tuple[str, str]]:
    """The record's values as one CSV line (no key, no newline), or `(None, (column,
    reason))` for a value that does not fit its column."""
    fields = []
    for column, kind in columns.items():
        value = record.get(column)
        if value is None:
            fields.append("")
            continue
        problem = _check_value(kind, value)
        if problem is not None:
            return None, (column, problem)
        fields.append(str(value) if kind == "int" else csv_text(value))
    return ",".join(fields), None


def _check_value(kind: str, value: Any) -> str | None:
    """Why `value` cannot be stored in a column of type `kind`, or None."""
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"value {value!r} is not an int"
        if not INT64_MIN <= value <= INT64_MAX:
            return f"value {value} is outside int64"
        return None
    if not isinstance(value, str):
        return f"value {value!r} is not a {kind}"
    if "\x00" in value:
        return "a NUL character cannot be stored in PostgreSQL text"
    if kind == "date":
        try:
            if not ISO_DATE_TEXT.fullmatch(value):
                raise ValueError(value)
            dt.date.fromisoformat(value)
        except ValueError:
            return f"value {value!r} is not an ISO date (YYYY-MM-DD)"
    return None


def _encode_column(values: list[Any]) -> list[str] | None:
    """One column of a batch as the fields `csv.writer` writes for it in `encode_batch`
    (text quoted, ints bare, null `_NULL`), by C-level string operations over the whole
    column instead of Python code per value; None when it holds anything else, or a NUL
    (the separator here; COPY refuses it anyway)."""
    kinds = set(map(type, values))
    nulls = type(None) in kinds
    if kinds <= INT_OR_NULL:
        if not nulls:
            return list(map(str, values))
        # str(None) is the only "None" an int column can give: one C-level replace
        return "\x00".join(map(str, values)).replace("None", _NULL_FIELD).split("\x00")
    if not kinds <= TEXT_OR_NULL:
        return None
    texts = ["" if v is None else v for v in values] if nulls else values
    joined = "\x00".join(texts)
    if joined.count("\x00") != len(values) - 1:
        return None
    fields = ('"' + joined.replace('"', '""').replace("\x00", '"\x00"') + '"').split("\x00")
    if nulls:
        fields = [_NULL_FIELD if v is None else f for v, f in zip(values, fields, strict=True)]
    return fields
