"""CSV partitioning properties (hypothesis, `max_examples=200, deadline=None`) and the
regressions from public CSV test suites (lone CRs, broken quoted fields)."""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dag import csvlong, csvparts
from dag.csvparts import read_csv_batches
from dag.errors import CsvFormatError
from dag.records import Position, RawBatch
from tests.unit.dag.csvfiles import (
    PROPERTY,
    errors_of,
    lines_of,
    read,
    rows_of,
)

# --- properties -------------------------------------------------------------------------

FIELD = st.text(
    alphabet=st.one_of(
        st.sampled_from([",", ";", "\t", '"', "\n", "\r", " ", "a", "é", "€", "😀"]),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=8,
)


@st.composite
def csv_files(draw):
    """A CSV file written by csv.writer, with the expected records and offsets."""
    delimiter = draw(st.sampled_from([",", ";", "\t"]))
    terminator = draw(st.sampled_from(["\r\n", "\n"]))
    width = draw(st.integers(1, 4))
    header = draw(st.lists(FIELD.filter(bool), min_size=width, max_size=width, unique=True))
    rows = draw(st.lists(st.lists(FIELD, min_size=width, max_size=width), max_size=60))
    bom = draw(st.booleans())

    def encode(row: list[str]) -> bytes:
        out = io.StringIO(newline="")
        # csv.writer quotes only the characters of its own line terminator, so write with
        # "\r\n" (a lone "\r" in a field gets quoted) and then end the line as chosen.
        csv.writer(out, delimiter=delimiter, lineterminator="\r\n").writerow(row)
        return (out.getvalue()[:-2] + terminator).encode("utf-8")

    data = (b"\xef\xbb\xbf" if bom else b"") + encode(header)
    header_end = len(data)
    starts: list[tuple[int, int]] = []  # (offset, line) of every record
    ends: list[int] = []
    for row in rows:
        if draw(st.integers(0, 9)) == 0:
            data += terminator.encode()  # an empty line between records
        starts.append((len(data), data.count(b"\n") + 1))
        data += encode(row)
        ends.append(len(data))
    return delimiter, data, header, rows, starts, ends, header_end


def plain(rows: list[list[str | None]]) -> list[list[str]]:
    return [["" if v is None else v for v in row] for row in rows]


@PROPERTY
@given(csv_files(), st.integers(1, 50))
def test_property_batches_concatenate_to_csv_reader_output(generated, batch_size):
    delimiter, data, header, rows, starts, _, _ = generated
    batches = read(data, delimiter=delimiter, batch_size=batch_size)
    text = data.decode("utf-8-sig")
    parsed = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter) if r]
    assert batches[0].header == parsed[0] == header
    assert plain(rows_of(batches)) == parsed[1:] == rows
    assert errors_of(batches) == []
    assert lines_of(batches) == [line for _, line in starts]
    assert all(b.size == batch_size for b in batches[:-1])
    assert 0 <= batches[-1].size <= batch_size


@PROPERTY
@given(csv_files(), st.integers(1, 50))
def test_property_resume_at_every_batch_end_yields_the_rest(generated, batch_size):
    delimiter, data, header, rows, _, ends, header_end = generated
    batches = read(data, delimiter=delimiter, batch_size=batch_size)
    done = 0
    for batch in batches:
        done += batch.size
        # An end is always right after a record (never inside a quoted field), with the
        # line number found at that offset.
        assert batch.end.offset in {header_end, *ends}
        assert batch.end.line == data[: batch.end.offset].count(b"\n") + 1
        rest = read(data, delimiter=delimiter, batch_size=batch_size, start=batch.end)
        assert plain(rows_of(rest)) == rows[done:]
        assert rest[0].header == header
    assert done == len(rows)


@PROPERTY
@given(
    st.lists(st.lists(FIELD, min_size=2, max_size=2), min_size=1, max_size=20),
    st.data(),
)
def test_property_a_bad_record_never_hides_the_good_ones(rows, data):
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(["a", "b"])
    bad = data.draw(st.integers(0, len(rows) - 1))
    lines: list[bytes] = []
    for i, row in enumerate(rows):
        piece = io.StringIO(newline="")
        csv.writer(piece).writerow([*row, "extra"] if i == bad else row)
        lines.append(piece.getvalue().encode())
    blob = out.getvalue().encode() + b"".join(lines)
    batches = read(blob, batch_size=data.draw(st.integers(1, 10)))
    assert plain(rows_of(batches)) == rows[:bad] + rows[bad + 1 :]
    [error] = errors_of(batches)
    assert "found 3" in error.reason


def read_all_long(data: bytes, **kwargs) -> list[RawBatch]:
    """`read`, with every record of more than 4 bytes a long one (`dag.csvlong` splits it,
    not `csv.reader`)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(csvlong, "LONG_LINE_BYTES", 4)
        patch.setattr(csvparts, "LONG_LINE_BYTES", 4)
        return read(data, **kwargs)


def shown(batches: list[RawBatch]) -> list:
    return [
        (
            b.end,
            [(r.line, r.values) for r in b.records],
            [(e.line, e.reason, e.raw) for e in b.row_errors],
        )
        for b in batches
    ]


@PROPERTY
@given(csv_files(), st.integers(1, 50))
def test_property_long_records_read_as_csv_reader_reads_them(generated, batch_size):
    delimiter, data, _, rows, starts, _, _ = generated
    batches = read_all_long(data, delimiter=delimiter, batch_size=batch_size)
    assert plain(rows_of(batches)) == rows
    assert errors_of(batches) == []
    assert lines_of(batches) == [line for _, line in starts]
    assert shown(batches) == shown(read(data, delimiter=delimiter, batch_size=batch_size))


@PROPERTY
@given(
    st.text(alphabet=st.sampled_from(["a", "é", ",", '"', "\n", "\r", " "]), max_size=80),
    st.integers(1, 5),
)
def test_property_any_text_reads_the_same_with_every_record_long(text, batch_size):
    data = b"h,i\n" + text.encode()
    assert shown(read_all_long(data, batch_size=batch_size)) == shown(
        read(data, batch_size=batch_size)
    )


def test_a_long_quoted_field_never_yields_a_record_from_inside_it() -> None:
    # Regression: past the csv module's default 128 KiB field limit the reader restarted on
    # the next physical line, which was still inside the quoted field.
    note = "x" * 200_000 + "\n7,8\nend of note"
    data = f'a,b\n1,"{note}"\n2,ok\n'.encode()
    (batch,) = list(read_csv_batches(io.BytesIO(data)))
    assert batch.row_errors == []
    assert [(r.line, r.values) for r in batch.records] == [
        (2, {"a": "1", "b": note}),
        (5, {"a": "2", "b": "ok"}),
    ]


# --- lone CRs and broken quoted fields (regressions from public CSV test suites) ---------


@pytest.mark.parametrize(
    ("data", "good", "bad"),
    [
        # A CR at the end of the file was taken for a line end and the record imported.
        (b"a,b\n1,2\r", [], [(2, "1,2\r")]),
        # A CR before a CRLF: the record was imported, the CR swallowed.
        (b"a,b\n1,2\r\r\n3,4\n", [["3", "4"]], [(2, "1,2\r")]),
        # After a closing quote, then more CRs at the end of the file.
        (b'a\n"x"\r\r', [], [(2, '"x"\r\r')]),
        # A line of only CRs was skipped as if empty.
        (b"a,b\n\r\r\n1,2\n", [["1", "2"]], [(2, "\r")]),
        (b"a,b\n\r\n1,2\n\r", [["1", "2"]], [(4, "\r")]),
    ],
)
def test_a_lone_cr_outside_quotes_is_a_row_error_wherever_it_is(data, good, bad):
    batches = read(data, batch_size=1)
    assert rows_of(batches) == good
    errors = errors_of(batches)
    assert [(e.line, e.raw) for e in errors] == bad
    assert all("carriage return" in e.reason for e in errors)


def test_crs_inside_quotes_are_data_and_crlf_is_a_line_end():
    data = b'a,b\r\n"x\ry","\r\r"\r\n"p\r\r\nq",z\r\n'
    assert rows_of(read(data)) == [["x\ry", "\r\r"], ["p\r\r\nq", "z"]]
    assert errors_of(read(data)) == []


def test_a_lone_cr_in_the_header_is_a_format_error():
    for data in (b"a,b\r\r\n1,2\n", b"\r\r\na,b\n1,2\n", b"a,b\r"):
        with pytest.raises(CsvFormatError, match="carriage return"):
            read(data)


def test_the_tail_of_a_broken_quoted_field_is_rejected_not_invented():
    # Regression: the reader resumed at the next physical line and read `s",t` as the
    # record {a: 's"', b: 't'}.
    data = b'a,b\n"p"q,"r\ns",t\n1,2\n'
    batches = read(data, batch_size=1)
    assert rows_of(batches) == [["1", "2"]]
    [error] = errors_of(batches)
    assert (error.line, error.raw) == (2, '"p"q,"r\ns",t')
    assert "malformed" in error.reason
    assert lines_of(batches) == [4]


def test_a_broken_quoted_field_that_never_closes_costs_its_own_line():
    data = b'a,b\n1,2\n"p"q,"r\n3,4\n5,6\n'
    batches = read(data)
    assert rows_of(batches) == [["1", "2"], ["3", "4"], ["5", "6"]]
    [error] = errors_of(batches)
    assert (error.line, error.raw) == (3, '"p"q,"r')
    assert "malformed" in error.reason
    assert batches[-1].end == Position(len(data), 6)


def test_a_broken_record_with_balanced_quotes_loses_only_its_own_line():
    data = b'a,b\n"x"y,"z"\n1,2\n'
    batches = read(data)
    assert [e.raw for e in errors_of(batches)] == ['"x"y,"z"']
    assert rows_of(batches) == [["1", "2"]]


@PROPERTY
@given(
    st.lists(st.lists(FIELD, min_size=2, max_size=2), min_size=1, max_size=20),
    st.data(),
)
def test_property_a_broken_quoted_field_never_yields_an_invented_record(rows, data):
    # One record is damaged after a closing quote while its next field, quoted, spans
    # lines: every other record comes out intact, the damaged one is one row error.
    tail = data.draw(st.lists(st.sampled_from(["s", ",", "t", "\n", '""', " "]), max_size=8))
    damaged = '"p"q,"r\n' + "".join(tail) + '"\n'
    bad = data.draw(st.integers(0, len(rows)))
    pieces: list[str] = []
    for row in rows:
        piece = io.StringIO(newline="")
        csv.writer(piece, lineterminator="\r\n").writerow(row)
        pieces.append(piece.getvalue())
    pieces.insert(bad, damaged)
    blob = ("a,b\n" + "".join(pieces)).encode()
    batches = read(blob, batch_size=data.draw(st.integers(1, 10)))
    assert plain(rows_of(batches)) == rows
    [error] = errors_of(batches)
    assert error.raw == damaged[:-1]


@PROPERTY
@given(st.binary(max_size=200), st.integers(1, 10))
def test_property_any_bytes_give_records_and_row_errors_on_disjoint_lines(blob, size):
    # Never an exception but CsvFormatError; no record starts on a line that belongs to
    # another record or to a row error (nothing read twice or out of a broken record).
    try:
        batches = read(b"a,b\n" + blob, batch_size=size)
    except CsvFormatError:
        return
    taken: set[int] = set()
    spans = [(r.line, 0) for b in batches for r in b.records]
    spans += [(e.line, e.raw.count("\n")) for e in errors_of(batches)]
    for first, extra in spans:
        lines = set(range(first, first + extra + 1))
        assert not lines & taken
        taken |= lines


def _exact_only(data: bytes, **kwargs) -> list[RawBatch]:
    """`read` with every batch read by the exact line-by-line reader."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(csvparts, "_bare_batch", lambda *a: None)
        monkeypatch.setattr(csvparts, "_plain_batch", lambda *a: None)
        return read(data, **kwargs)


RAW_PIECES = st.sampled_from(
    [b"a", b"1", b",", b";", b'"', b'""', b"\n", b"\r\n", b"\r", b" ", b"\xc3\xa9", b"\xff", b""]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(RAW_PIECES, max_size=80),
    st.integers(1, 6),
    st.sampled_from([",", ";"]),
)
def test_property_the_plain_reader_agrees_with_the_exact_one_on_any_bytes(
    pieces, batch_size, delimiter
):
    """Whatever the bytes (malformed records, CRs, invalid UTF-8, empty and quoted-empty
    values), batches, records, lines, row errors and positions are those of the exact
    line-by-line reader alone."""
    data = b"h1,h2\n".replace(b",", delimiter.encode()) + b"".join(pieces)
    exact = _exact_only(data, delimiter=delimiter, batch_size=batch_size)
    assert read(data, delimiter=delimiter, batch_size=batch_size) == exact


@PROPERTY
@given(csv_files(), st.integers(1, 50))
def test_property_the_plain_reader_agrees_on_well_formed_files(generated, batch_size):
    delimiter, data, *_ = generated
    exact = _exact_only(data, delimiter=delimiter, batch_size=batch_size)
    assert read(data, delimiter=delimiter, batch_size=batch_size) == exact


BARE_PIECES = st.sampled_from(
    [
        b"a",
        b"1",
        b",",
        b";",
        b'"x"',
        b'""',
        b'"a,b"',
        b'"q""q"',
        b'"l\nm"',
        b'"\n"',
        b"\n",
        b'a"b',
        b" ",
        b"\xc3\xa9",
        b"",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(BARE_PIECES, max_size=80), st.integers(1, 6), st.booleans())
def test_property_the_bare_reader_agrees_with_the_exact_one(pieces, batch_size, plain_too):
    """Bytes made mostly of batches the bare reader takes (quoted fields, on one line or
    across lines, quotes inside unquoted fields, empty and quoted-empty values, short and
    long rows): the same batches, records, lines, row
    errors and positions as the exact reader alone, with or without the plain reader."""
    data = b"h1,h2\n" + b"".join(pieces)
    exact = _exact_only(data, batch_size=batch_size)
    with pytest.MonkeyPatch.context() as monkeypatch:
        if not plain_too:
            monkeypatch.setattr(csvparts, "_plain_batch", lambda *a: None)
        assert read(data, batch_size=batch_size) == exact


def test_the_bare_reader_reads_one_record_per_line_a_column_at_a_time():
    data = b'id,name,note\n1,"Ann ""A""","a, b"\n2,,x\n3,Bo,""'
    batches = read(data, batch_size=2)
    assert [type(b.records).__name__ for b in batches] == ["ColumnRecords", "list"]
    assert batches[0].records.columns == [["1", "2"], ['Ann "A"', None], ["a, b", "x"]]
    assert batches[1].records[0].values == {"id": "3", "name": "Bo", "note": ""}
    assert [r.line for b in batches for r in b.records] == [2, 3, 4]
    assert batches[1].end == Position(len(data), 4)
    assert read(data, batch_size=2) == _exact_only(data, batch_size=2)


def test_the_bare_reader_takes_quoted_fields_across_lines():
    data = b'id,note\n1,"a\nb, c"\n2,x\n3,"p\n\nq"\n'
    batches = read(data, batch_size=2)
    assert type(batches[0].records).__name__ == "ColumnRecords"
    assert batches[0].records.columns == [["1", "2"], ["a\nb, c", "x"]]
    assert batches[0].records.lines() == [2, 4] and batches[0].end == Position(23, 5)
    assert read(data, batch_size=2) == _exact_only(data, batch_size=2)


QUOTE_FREE_FIELDS = st.sampled_from(["", "a", "1", "NA", "\xe9", " "])


@settings(max_examples=400, deadline=None)
@given(
    st.integers(1, 5),
    st.lists(st.lists(QUOTE_FREE_FIELDS, min_size=0, max_size=7), max_size=30),
    st.integers(1, 12),
    st.booleans(),
)
def test_property_quote_free_batches_split_at_once_as_line_by_line(
    width, rows, batch_size, last_line_end
):
    """Quote-free lines, split a batch at a time (`_quote_free_columns`): records of every
    width (a short line beside a long one, whose fields add up to whole records), empty
    values first, last and in between, as the exact reader reads them line by line."""
    header = ",".join(f"h{i}" for i in range(width))
    text = "\n".join([header, *(",".join(row) for row in rows)])
    data = (text + "\n" * last_line_end).encode()
    assert read(data, batch_size=batch_size) == _exact_only(data, batch_size=batch_size)


def test_a_short_and_a_long_line_are_not_two_records_split_at_once():
    data = b"a,b,c\n1,2\n3,4,5,6\n7,8,9\n"
    batches = read(data, batch_size=3)
    assert [r.values for r in batches[0].records] == [{"a": "7", "b": "8", "c": "9"}]
    assert [e.line for e in batches[0].row_errors] == [2, 3]
    assert batches == _exact_only(data, batch_size=3)


def test_empty_values_split_at_once_are_null_wherever_they_are():
    for data in (b"a,b,c\n,1,\n2,,3\n4,5,", b"a,b\n1,\n", b"a,b\n,1\n"):
        batches = read(data, batch_size=5)
        assert type(batches[0].records).__name__ == "ColumnRecords"
        assert "" not in [v for r in batches[0].records for v in r.values.values()]
        assert batches == _exact_only(data, batch_size=5)
