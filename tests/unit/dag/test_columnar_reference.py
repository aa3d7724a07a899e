"""The engine's column-at-a-time path (`read_csv_batches` with its bare and plain readers,
`type_records`' column typing, `normalize_whitespace`, `aggregate`) against a straightforward
per-record reference written here, on generated CSV with quotes, multi-line fields, nulls,
`""`, non-canonical and out-of-range ints and bad dates: the same records (values, lines,
ordinals), the same rejects (line, record, column, raw values) and the same aggregates (or
the same refusal of a sum outside int64), whatever the batch size."""

from __future__ import annotations

import io
import re
from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from dag.csvparts import read_csv_batches
from dag.errors import Int64OverflowError
from dag.limits import INT64_MAX, INT64_MIN
from dag.transforms import build_transform
from dag.types import type_records

COLUMNS = {"id": "int", "name": "string", "amount": "int", "signup": "date", "city": "string"}
OVERFLOW = "a sum outside int64"
INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")

TEXT = st.text(
    alphabet=st.sampled_from([" ", "\t", "\n", ",", '"', "a", "B", "é", "\u00a0", "\u2003"]),
    max_size=10,
)
INTS = st.one_of(
    st.integers(-5, 5).map(str),
    st.integers(INT64_MIN, INT64_MAX).map(str),
    st.sampled_from([str(INT64_MAX + 1), str(INT64_MIN - 1), "007", "-0", "+1", "1.5", "x"]),
    st.just(""),
    st.none(),
)
DATES = st.one_of(
    st.dates().map(date.isoformat),
    st.sampled_from(["2023-02-29", "2023-13-01", "20230101", "0000-01-01"]),
    st.just(""),
    st.none(),
)
ROWS = st.lists(
    st.tuples(INTS, st.one_of(TEXT, st.none()), INTS, DATES, st.sampled_from(["Oslo", "Riga"])),
    max_size=40,
)


def _field(value: str | None) -> str:
    """None as an empty unquoted field (null), text quoted when it must be, `""` quoted."""
    if value is None:
        return ""
    if value == "" or any(c in value for c in ',"\n\r'):
        return '"' + value.replace('"', '""') + '"'
    return value


def _csv(rows: list[tuple]) -> tuple[bytes, list[int]]:
    """The file, and the first line of each record."""
    lines, text = [], ",".join(COLUMNS) + "\n"
    for row in rows:
        lines.append(text.count("\n") + 1)
        text += ",".join(map(_field, row)) + "\n"
    return text.encode(), lines


def _convert(value: str | None, kind: str) -> int | str | None:
    """The reference conversion of one value (raises ValueError)."""
    if kind == "string" or value is None:
        return value
    if value == "":
        return None
    if kind == "int":
        if not INT_TEXT.fullmatch(value) or not INT64_MIN <= int(value) <= INT64_MAX:
            raise ValueError(value)
        return int(value)
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        raise ValueError(value)
    date.fromisoformat(value)
    return value


def _reference(rows: list[tuple], lines: list[int]) -> tuple[list, list, list]:
    """Records (line, record dict), rejects (line, ordinal, column, raw) and the aggregate,
    one record at a time."""
    records, rejects, groups = [], [], {}
    for ordinal, (row, line) in enumerate(zip(rows, lines, strict=True), start=1):
        raw = dict(zip(COLUMNS, row, strict=True))
        typed = {}
        for name, kind in COLUMNS.items():
            try:
                typed[name] = _convert(raw[name], kind)
            except ValueError:
                rejects.append((line, ordinal, name, raw))
                break
        else:
            name = typed["name"]
            typed["name"] = None if name is None else " ".join(name.split())
            records.append((line, typed))
            acc = groups.setdefault((typed["city"],), [0, 0, None, None])
            acc[0] += 1
            if (amount := typed["amount"]) is not None:
                acc[1] += amount
                acc[2] = amount if acc[2] is None else min(acc[2], amount)
                acc[3] = amount if acc[3] is None else max(acc[3], amount)
    aggregate = [{"city": k[0], "count": a[0], "sum": a[1], "min": a[2], "max": a[3]}
                 for k, a in groups.items()]  # fmt: skip
    if any(not INT64_MIN <= a["sum"] <= INT64_MAX for a in aggregate):
        return records, rejects, OVERFLOW
    return records, rejects, aggregate


def _engine(data: bytes, batch_size: int) -> tuple[list, list, list]:
    """The same through the engine's functions, batch by batch."""
    normalize = build_transform({"op": "normalize_whitespace", "columns": ["name"]}, COLUMNS)
    aggregate = build_transform({"op": "aggregate", "column": "amount", "group_by": ["city"]},
                                COLUMNS)  # fmt: skip
    records, rejects, ordinal = [], [], 1
    for batch in read_csv_batches(io.BytesIO(data), batch_size=batch_size):
        assert batch.row_errors == []
        typed, errors = type_records(batch.records, COLUMNS, first_ordinal=ordinal)
        bad = {e.record for e in errors}
        good_lines = [r.line for i, r in enumerate(batch.records) if ordinal + i not in bad]
        rejects += [(e.line, e.record, e.column, e.raw) for e in errors]
        out, none = normalize.apply(typed, ordinal)
        assert none == []
        aggregate.apply(out, ordinal)
        records += list(zip(good_lines, out, strict=True))
        ordinal += len(batch.records)
    try:
        return records, rejects, aggregate.finish()
    except Int64OverflowError:
        return records, rejects, OVERFLOW


@settings(max_examples=150, deadline=None)
@given(ROWS, st.integers(1, 17))
def test_property_the_column_path_is_the_per_record_reference(rows, batch_size):
    data, lines = _csv(rows)
    assert _engine(data, batch_size) == _reference(rows, lines)


def test_the_reference_sees_what_the_generator_makes():
    """The cases the property is about are in its input: a multi-line quoted field, `""`, a
    null, an int beyond int64 and a date that is no calendar date."""
    rows = [
        ("1", "  a\n b ", "9223372036854775808", "2023-02-29", "Oslo"),
        ("2", "", None, "", "Riga"),
        ("3", None, "-4", "2024-02-29", "Oslo"),
    ]
    data, lines = _csv(rows)
    assert lines == [2, 4, 5]
    records, rejects, aggregate = _engine(data, 2)
    assert [r[1]["name"] for r in records] == ["", None]
    assert [(line, ordinal, column) for line, ordinal, column, _ in rejects] == [(2, 1, "amount")]
    assert aggregate == [
        {"city": "Riga", "count": 1, "sum": 0, "min": None, "max": None},
        {"city": "Oslo", "count": 1, "sum": -4, "min": -4, "max": -4},
    ]
