"""CSV partitioning: parsing rules, malformed records, batches and resume.

Property tests use hypothesis with `max_examples=200, deadline=None`.
"""

from __future__ import annotations

import csv
import io

import pytest

from dag import csvparts
from dag.csvparts import read_csv_batches
from dag.errors import CsvFormatError
from dag.records import Position
from tests.unit.dag.csvfiles import (
    FIXTURES,
    errors_of,
    lines_of,
    read,
    rows_of,
)

# --- the basics -------------------------------------------------------------------------


def test_header_values_lines_and_end():
    data = b"id,name\n1,Ann\n2,Bob\n"
    [batch] = read(data)
    assert batch.header == ["id", "name"]
    assert [r.values for r in batch.records] == [
        {"id": "1", "name": "Ann"},
        {"id": "2", "name": "Bob"},
    ]
    assert lines_of([batch]) == [2, 3]
    assert batch.row_errors == []
    assert batch.end == Position(len(data), 4)


def test_last_record_without_newline():
    data = b"a,b\n1,2\n3,4"
    [batch] = read(data)
    assert rows_of([batch]) == [["1", "2"], ["3", "4"]]
    assert batch.end == Position(len(data), 3)


def test_bom_is_stripped_and_offsets_count_it():
    data = b"\xef\xbb\xbfid,name\r\n1,Ann\r\n2,Bob\r\n"
    batches = read(data, batch_size=1)
    assert batches[0].header == ["id", "name"]
    assert rows_of(batches) == [["1", "Ann"], ["2", "Bob"]]
    assert batches[0].end == Position(len(b"\xef\xbb\xbfid,name\r\n1,Ann\r\n"), 3)
    assert rows_of(read(data, start=batches[0].end)) == [["2", "Bob"]]


def test_crlf_line_endings():
    data = b"a,b\r\n1,2\r\n3,4\r\n"
    batches = read(data)
    assert rows_of(batches) == [["1", "2"], ["3", "4"]]
    assert lines_of(batches) == [2, 3]


def test_quoted_fields_with_delimiters_quotes_and_newlines():
    data = (
        b'id,name,note\n1,"Smith, Ann","said ""hi""\nand left"\n'
        b'2,"two\r\nCRLF lines",x\n3,plain,"a\n\nb"\n4,last,y\n'
    )
    batches = read(data)
    assert rows_of(batches) == [
        ["1", "Smith, Ann", 'said "hi"\nand left'],
        ["2", "two\r\nCRLF lines", "x"],
        ["3", "plain", "a\n\nb"],
        ["4", "last", "y"],
    ]
    assert lines_of(batches) == [2, 4, 6, 9]


def test_empty_field_is_null_and_quoted_empty_is_empty_string():
    data = b'a,b,c\n,"",x\n"",,\n"x""",,""\n'
    assert rows_of(read(data)) == [
        [None, "", "x"],
        ["", None, None],
        ['x"', None, ""],
    ]


def test_empty_lines_are_skipped_everywhere():
    data = b"\n\r\na,b\n\n1,2\r\n\n\n3,4\n\n"
    batches = read(data, batch_size=1)
    assert rows_of(batches) == [["1", "2"], ["3", "4"]]
    assert lines_of(batches) == [5, 8]
    assert [b.size for b in batches] == [1, 1]


def test_header_only_gives_one_empty_batch_with_the_header():
    [batch] = read(b"a,b\n")
    assert batch.header == ["a", "b"]
    assert batch.records == [] and batch.row_errors == []
    assert batch.end == Position(4, 2)


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_other_delimiters(delimiter):
    d = delimiter.encode()
    data = b"a" + d + b"b\n1" + d + b'"x' + d + b'y"\n' + b"2,3" + d + b"\n"
    batches = read(data, delimiter=delimiter)
    assert batches[0].header == ["a", "b"]
    assert rows_of(batches) == [["1", "x" + delimiter + "y"], ["2,3", None]]


@pytest.mark.parametrize("delimiter", ["", ";;", '"', "\n"])
def test_unusable_delimiter_is_refused(delimiter):
    with pytest.raises(ValueError):
        read(b"a\n1\n", delimiter=delimiter)


def test_batch_size_must_be_positive():
    with pytest.raises(ValueError):
        read(b"a\n1\n", batch_size=0)


# --- the header -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b"", 1, "empty"),
        (b"\n\r\n", 1, "empty"),
        (b"a,,c\n1,2,3\n", 1, "empty name"),
        (b"a,b,\n1,2,3\n", 1, "empty name"),
        (b"a,b,a\n1,2,3\n", 1, "duplicate"),
        (b"\na,\xffb\n1,2\n", 2, "UTF-8"),
        (b'a,"b\n1,2\n', 1, "malformed header"),
        (b'a,"b"c\n1,2\n', 1, "malformed header"),
    ],
)
def test_bad_header_raises(data, line, words):
    with pytest.raises(CsvFormatError) as info:
        read(data)
    assert info.value.line == line
    assert words in str(info.value)


# --- malformed records become row errors --------------------------------------------------


def test_wrong_field_count_is_a_row_error_and_reading_goes_on():
    data = b"a,b,c\n1,2,3\n4,5\n6,7,8,9\n10,11,12\n"
    batches = read(data)
    assert rows_of(batches) == [["1", "2", "3"], ["10", "11", "12"]]
    few, many = errors_of(batches)
    assert (few.line, few.column, few.raw) == (3, None, "4,5")
    assert "expected 3" in few.reason and "found 2" in few.reason
    assert (many.line, many.raw) == (4, "6,7,8,9")
    assert "expected 3" in many.reason and "found 4" in many.reason


def test_wrong_field_count_of_a_multiline_record_reports_its_first_line():
    data = b'a,b\n"x\ny",1,2\r\n3,4\n'
    batches = read(data)
    [error] = errors_of(batches)
    assert error.line == 2
    assert error.raw == '"x\ny",1,2'
    assert rows_of(batches) == [["3", "4"]]
    assert lines_of(batches) == [4]


def test_invalid_utf8_mid_file_is_a_row_error_and_later_records_parse():
    data = b"a,b\n1,ok\n2,caf\xe9\n3,\xc3\xa9t\xc3\xa9\n"
    batches = read(data)
    assert rows_of(batches) == [["1", "ok"], ["3", "été"]]
    [error] = errors_of(batches)
    assert error.line == 3
    assert "UTF-8" in error.reason
    assert error.raw == "2,caf\ufffd"


def test_invalid_utf8_inside_a_multiline_quoted_field():
    data = b'a,b\n1,"x\n\xff\ny"\n2,z\n'
    batches = read(data)
    [error] = errors_of(batches)
    assert (error.line, error.raw) == (2, '1,"x\n\ufffd\ny"')
    assert rows_of(batches) == [["2", "z"]]
    assert lines_of(batches) == [5]


def test_a_quote_no_later_quote_closes_costs_its_own_line():
    data = b'a,b\n1,2\n3,"open\n4,5\n6,7\n'
    batches = read(data)
    assert rows_of(batches) == [["1", "2"], ["4", "5"], ["6", "7"]]
    [error] = errors_of(batches)
    assert error.line == 3
    assert "unterminated" in error.reason
    assert error.raw == '3,"open'
    assert batches[-1].end == Position(len(data), 6)


def test_text_after_a_closing_quote_is_a_row_error():
    data = b'a,b\n"x"y,1\n2,3\n'
    batches = read(data)
    [error] = errors_of(batches)
    assert error.line == 2
    assert "malformed" in error.reason
    assert error.raw == '"x"y,1'
    assert rows_of(batches) == [["2", "3"]]


def test_lone_carriage_return_outside_quotes_is_a_row_error():
    data = b"a,b\n1,x\ry\n2,3\n"
    batches = read(data)
    assert [e.line for e in errors_of(batches)] == [2]
    assert rows_of(batches) == [["2", "3"]]


def test_quote_inside_an_unquoted_field_is_literal():
    assert rows_of(read(b'a,b\n5" disk,x\n')) == [['5" disk', "x"]]


def test_bad_records_count_towards_the_batch_size():
    data = b"a,b\n1,2\nbad\n3,4\nbad\n5,6\n"
    batches = read(data, batch_size=2)
    assert [b.size for b in batches] == [2, 2, 1]
    assert [len(b.row_errors) for b in batches] == [1, 1, 0]


# --- batches and resume ------------------------------------------------------------------


def test_batches_and_resume_from_every_end():
    data = b'a,b\n1,"x\ny"\n2,z\n\n3,"q""r"\n4,w\n5,v\n'
    batches = read(data, batch_size=2)
    assert [b.size for b in batches] == [2, 2, 1]
    whole = rows_of(batches)
    for i, batch in enumerate(batches):
        rest = read(data, batch_size=2, start=batch.end)
        assert rows_of(rest) == whole[2 * (i + 1) :]
        assert rest[0].header == ["a", "b"]


def test_start_at_or_before_the_header_end_means_from_the_first_record():
    data = b"a,b\n1,2\n3,4\n"
    expected = [["1", "2"], ["3", "4"]]
    assert rows_of(read(data, start=Position())) == expected
    assert rows_of(read(data, start=Position(4, 2))) == expected


def test_resume_at_the_end_yields_one_empty_batch():
    data = b"a,b\n1,2\n"
    [batch] = read(data, start=Position(len(data), 3))
    assert batch.records == [] and batch.header == ["a", "b"]


def test_full_last_batch_is_not_followed_by_an_empty_one():
    batches = read(b"a\n1\n2\n\n", batch_size=2)
    assert [b.size for b in batches] == [2]


# --- fixtures ---------------------------------------------------------------------------


def test_customers_fixture_parses_with_multiline_names():
    with open(FIXTURES / "customers.csv", "rb") as stream:
        batches = list(read_csv_batches(stream, batch_size=7))
    records = [r for b in batches for r in b.records]
    assert batches[0].header == ["id", "name", "amount", "signup", "status", "country"]
    assert len(records) >= 35
    assert errors_of(batches) == []
    assert any("\n" in (r.values["name"] or "") for r in records)
    assert any('"' in (r.values["name"] or "") for r in records)
    lines = [r.line for r in records]
    assert lines == sorted(lines) and len(set(lines)) == len(lines)


def test_bad_fieldcount_fixture():
    with open(FIXTURES / "bad_fieldcount.csv", "rb") as stream:
        batches = list(read_csv_batches(stream))
    errors = errors_of(batches)
    assert errors and all("wrong number of fields" in e.reason for e in errors)
    assert rows_of(batches)


def test_bad_unterminated_fixture():
    with open(FIXTURES / "bad_unterminated.csv", "rb") as stream:
        batches = list(read_csv_batches(stream))
    [error] = errors_of(batches)
    assert "unterminated" in error.reason
    assert rows_of(batches)


# --- long lines ---------------------------------------------------------------------------------


def test_a_long_unquoted_line_reads_as_csv_reads_it() -> None:
    big = "x" * (csvparts.LONG_LINE_BYTES * 3)
    data = f'id,a,b\n1,{big},\n2,{big},tail\n3,"q,{big}",z\n'.encode()
    rows = rows_of(read(data))
    expected = [["1", big, None], ["2", big, "tail"], ["3", f"q,{big}", "z"]]
    assert rows == expected
    assert lines_of(read(data)) == [2, 3, 4]
    exact = list(csv.reader(io.StringIO(data.decode())))[1:]
    assert [[v if v else None for v in r] for r in exact] == expected


def test_a_long_line_with_a_cr_or_bad_utf8_is_still_refused_or_rejected() -> None:
    big = "y" * (csvparts.LONG_LINE_BYTES * 2)
    crlf = read(f"id,a\r\n1,{big}\r\n".encode())
    assert rows_of(crlf) == [["1", big]]  # CRLF: read by the exact reader, the same record
    broken = read(b"id,a\n1," + b"\xff" * (csvparts.LONG_LINE_BYTES + 1) + b"\n2,ok\n")
    assert rows_of(broken) == [["2", "ok"]]
    assert [e.line for e in errors_of(broken)] == [2]
