"""JSON Lines and JSON-array readers: header, row errors, syntax errors, batches, resume.

Property tests use hypothesis with `max_examples=200, deadline=None`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dag.errors import InputDataError
from dag.jsonparts import read_json_batches, read_jsonl_batches
from dag.records import Position, RawBatch

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
PROPERTY = settings(max_examples=200, deadline=None)


def jsonl(data: bytes, **kwargs) -> list[RawBatch]:
    return list(read_jsonl_batches(io.BytesIO(data), **kwargs))


def jarray(data: bytes, **kwargs) -> list[RawBatch]:
    return list(read_json_batches(io.BytesIO(data), **kwargs))


def values_of(batches: list[RawBatch]) -> list[dict]:
    return [r.values for b in batches for r in b.records]


def lines_of(batches: list[RawBatch]) -> list[int]:
    return [r.line for b in batches for r in b.records]


def errors_of(batches: list[RawBatch]):
    return [e for b in batches for e in b.row_errors]


# --- JSON Lines -------------------------------------------------------------------------


def test_jsonl_records_lines_and_header_order():
    data = b'{"b": 1, "a": "x"}\n\n{"a": "y", "c": null}\r\n{"c": 3}\n'
    [batch] = jsonl(data)
    assert batch.header == ["b", "a", "c"]
    assert values_of([batch]) == [
        {"b": 1, "a": "x", "c": None},
        {"b": None, "a": "y", "c": None},
        {"b": None, "a": None, "c": 3},
    ]
    assert lines_of([batch]) == [1, 3, 4]
    assert batch.end == Position(len(data), 5)


def test_jsonl_bad_lines_are_row_errors():
    data = b'{"a": 1}\n[1, 2]\n{"a": \n"text"\n{"a": "caf\xe9"}\n{"a": 2}\n'
    batches = jsonl(data)
    assert values_of(batches) == [{"a": 1}, {"a": 2}]
    errors = errors_of(batches)
    assert [(e.line, e.reason.split(":")[0]) for e in errors] == [
        (2, "not a JSON object"),
        (3, "invalid JSON"),
        (4, "not a JSON object"),
        (5, "invalid UTF-8"),
    ]
    assert errors[0].raw == "[1, 2]"
    assert errors[3].raw == '{"a": "caf\ufffd"}'


def test_jsonl_unknown_column_after_the_first_batch():
    data = b'{"a": 1}\n{"a": 2, "b": 1}\n{"a": 3}\n'
    batches = jsonl(data, batch_size=1)
    assert [b.header for b in batches] == [["a"]] * 3
    [error] = errors_of(batches)
    assert (error.line, error.column) == (2, "b")
    assert "unknown column" in error.reason
    # Within the first batch a new key extends the header instead.
    [whole] = jsonl(data, batch_size=3)
    assert whole.header == ["a", "b"]
    assert values_of([whole]) == [{"a": 1, "b": None}, {"a": 2, "b": 1}, {"a": 3, "b": None}]


def test_jsonl_bom_and_empty_file():
    [batch] = jsonl(b'\xef\xbb\xbf{"a": 1}\n')
    assert values_of([batch]) == [{"a": 1}]
    [empty] = jsonl(b"")
    assert (empty.header, empty.records, empty.end) == ([], [], Position(0, 1))


def test_jsonl_resume_from_every_end():
    data = b"".join(
        json.dumps({"n": i}).encode() + b"\n" + (b"\n" if i % 3 else b"") for i in range(10)
    )
    batches = jsonl(data, batch_size=3)
    whole = values_of(batches)
    done = 0
    for batch in batches:
        done += batch.size
        assert values_of(jsonl(data, batch_size=3, start=batch.end)) == whole[done:]
    assert values_of(jsonl(data, batch_size=3, start=Position())) == whole


def test_jsonl_fixture():
    with open(FIXTURES / "customers.jsonl", "rb") as stream:
        batches = list(read_jsonl_batches(stream))
    assert batches[0].header[:3] == ["id", "name", "amount"]
    assert len(values_of(batches)) == 10 and errors_of(batches) == []


# --- JSON array -------------------------------------------------------------------------


def test_json_array_records_lines_and_ends():
    data = b'[\n  {"a": 1, "b": "x,]}\\""},\n  {"a": 2,\n   "c": [1, {"d": "}"}]}\n]\n'
    batches = jarray(data, batch_size=1)
    assert batches[0].header == ["a", "b"]
    assert values_of(batches) == [{"a": 1, "b": 'x,]}"'}]
    [error] = errors_of(batches)
    assert (error.line, error.column) == (3, "c")
    assert batches[0].end == Position(data.index(b'{"a": 2'), 3)
    assert lines_of(jarray(data, batch_size=2)) == [2, 3]


def test_json_array_non_objects_are_row_errors():
    data = b'[{"a": 1}, 5, "s,]", [1, 2], null, {"a": 2}]'
    batches = jarray(data)
    assert values_of(batches) == [{"a": 1}, {"a": 2}]
    assert [e.raw for e in errors_of(batches)] == ["5", '"s,]"', "[1, 2]", "null"]
    assert all(e.reason == "not a JSON object" for e in errors_of(batches))


def test_json_array_invalid_utf8_is_a_row_error():
    batches = jarray(b'[{"a": "\xff"},\n{"a": "ok"}]')
    assert values_of(batches) == [{"a": "ok"}]
    [error] = errors_of(batches)
    assert (error.line, error.reason) == (1, "invalid UTF-8")


@pytest.mark.parametrize("data", [b"[]", b"  [ \n ]  \n", b"\xef\xbb\xbf[]"])
def test_json_empty_array_gives_one_empty_batch(data):
    [batch] = jarray(data)
    assert (batch.header, batch.records, batch.row_errors) == ([], [], [])


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b"", 1, "expected '['"),
        (b'{"a": 1}', 1, "expected '['"),
        (b'[{"a": 1},\n]', 2, "expected an element"),
        (b"[,]", 1, "expected an element"),
        (b'[{"a": 1}\n{"a": 2}]', 2, "expected ',' or ']'"),
        (b'[{"a": 1}] trailing', 1, "after the end"),
        (b'[{"a": 1},\n{"a": ', 2, "ends inside an element"),
        (b'[{"a": "open', 1, "ends inside an element"),
        (b'[{"a": 1}', 1, "expected ',' or ']'"),
        (b'[\n{"a":\n tru}]', 3, "invalid JSON"),
    ],
)
def test_json_syntax_errors_raise_with_the_line(data, line, words):
    with pytest.raises(InputDataError) as info:
        jarray(data)
    assert info.value.line == line
    assert words in str(info.value)


def test_json_trailing_comma_is_caught_when_resuming_too():
    data = b'[{"a": 1},\n{"a": 2},\n]'
    first = next(read_json_batches(io.BytesIO(data), batch_size=2))
    with pytest.raises(InputDataError):
        jarray(data, batch_size=2, start=first.end)


def test_json_big_elements_across_buffer_refills():
    big = "x" * 200_000
    items = [{"n": i, "s": big if i % 2 else 'é\\"' * 5000} for i in range(6)]
    data = json.dumps(items, indent=1).encode()
    batches = jarray(data, batch_size=4)
    assert values_of(batches) == items
    assert values_of(jarray(data, batch_size=4, start=batches[0].end)) == items[4:]


@pytest.mark.parametrize("read", [jsonl, jarray])
def test_long_values_with_escapes_read_whole_and_a_long_bad_record_keeps_its_text(read):
    long = "\\" * 40_000 + '\\"' + "é" * 70_000 + '"\\'  # backslash runs before quotes
    items = [{"a": 1, "s": "x"}, {"a": 2, "s": long}, {"a": 3, "s": long, "b": 1}]
    if read is jsonl:
        data = b"".join(json.dumps(i).encode() + b"\r\n" for i in items)
    else:
        data = json.dumps(items).encode()
    batches = read(data, batch_size=1)
    assert values_of(batches) == items[:2]
    [error] = errors_of(batches)
    assert (error.line, error.column) == ((3, "b") if read is jsonl else (1, "b"))
    assert json.loads(error.raw) == items[2]  # its value encoded again: not held as text


def test_json_fixture():
    with open(FIXTURES / "customers.json", "rb") as stream:
        batches = list(read_json_batches(stream))
    assert batches[0].header == ["id", "name", "amount", "signup", "status", "country"]
    assert len(values_of(batches)) == 10 and errors_of(batches) == []


# --- properties -------------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
OBJECTS = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), VALUES, max_size=4)


@PROPERTY
@given(
    st.lists(OBJECTS, max_size=30),
    st.integers(1, 12),
    st.sampled_from([None, 0, 1, 2]),
    st.booleans(),
)
def test_property_json_array_batches_and_resume(objects, batch_size, indent, ascii_only):
    data = json.dumps(objects, indent=indent, ensure_ascii=ascii_only).encode()
    batches = jarray(data, batch_size=batch_size)
    header = batches[0].header
    expected = [{k: o.get(k) for k in header} for o in objects[:batch_size]]
    assert values_of(batches)[: len(expected)] == expected
    assert all(b.header == header for b in batches)
    assert sum(b.size for b in batches) == len(objects)
    for i, batch in enumerate(batches):
        assert batch.end.line == data[: batch.end.offset].count(b"\n") + 1
        rest = jarray(data, batch_size=batch_size, start=batch.end)
        # Resuming gives the very batches that followed (or one empty batch at the end).
        if i + 1 < len(batches):
            assert rest == batches[i + 1 :]
        else:
            assert [(b.records, b.row_errors) for b in rest] == [([], [])]


@PROPERTY
@given(st.lists(OBJECTS, max_size=30), st.integers(1, 12))
def test_property_jsonl_equals_json_array(objects, batch_size):
    lines = b"".join(json.dumps(o).encode() + b"\n" for o in objects)
    array = json.dumps(objects).encode()
    from_lines = jsonl(lines, batch_size=batch_size)
    from_array = jarray(array, batch_size=batch_size)
    assert values_of(from_lines) == values_of(from_array)
    assert [e.column for e in errors_of(from_lines)] == [e.column for e in errors_of(from_array)]
