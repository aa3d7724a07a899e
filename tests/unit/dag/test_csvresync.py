"""The recovery rule after a malformed CSV record (`dag.csvresync`), and another quote."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dag.records import Position
from tests.unit.dag.csvfiles import PROPERTY, errors_of, read, rows_of


@pytest.mark.parametrize(
    ("data", "good", "bad"),
    [
        # A stray quote that nothing closes: its line alone.
        (b'a,b\n1,"x\n2,y\n3,z\n', [["2", "y"], ["3", "z"]], [(2, '1,"x')]),
        # A stray quote that a later quoted field would close: still its line alone, and
        # the later multi-line record reads whole.
        (
            b'a,b\n1,"x\n2,y\n3,"p\nq"\n',
            [["2", "y"], ["3", "p\nq"]],
            [(2, '1,"x')],
        ),
        # Text after a closing quote on a balanced line: that line.
        (b'a,b\n"x"y,1\n2,3\n', [["2", "3"]], [(2, '"x"y,1')]),
        # A multi-line record with one field too many: the record, as its quotes balance.
        (b'a,b\n1,"p\nq",3\n4,5\n', [["4", "5"]], [(2, '1,"p\nq",3')]),
        # A stray quote at the last line, without a line end.
        (b'a,b\n1,2\n3,"x', [["1", "2"]], [(3, '3,"x')]),
    ],
)
def test_one_bad_line_costs_one_row(data, good, bad):
    for size in (1, 2, 500):
        batches = read(data, batch_size=size)
        assert rows_of(batches) == good
        assert [(e.line, e.raw) for e in errors_of(batches)] == bad
        assert batches[-1].end.offset == len(data)


def test_three_stray_quotes_the_first_alone_the_next_two_pair_up():
    # The rule reads quote parity: after the first (odd rest), the next two stray quotes
    # close each other, and the lines from one to the other are one bad record.
    lines = [b"a,b"] + [f"{i},v{i}".encode() for i in range(1, 11)]
    for i in (2, 5, 8):
        lines[i] = f'{i},"broken'.encode()
    data = b"\n".join(lines) + b"\n"
    batches = read(data, batch_size=3)
    assert [(e.line, e.raw.count("\n")) for e in errors_of(batches)] == [(3, 0), (6, 3)]
    assert [r[0] for r in rows_of(batches)] == ["1", "3", "4", "9", "10"]


@PROPERTY
@given(
    st.lists(
        st.sampled_from([b'1,"x', b"2,y", b'"p"q,"r', b's",t', b"3,4,5", b'6,"a\nb"']), max_size=12
    ),
    st.integers(1, 4),
)
def test_property_a_resumed_read_gives_the_same_records_and_rejects(lines, size):
    data = b"a,b\n" + b"\n".join(lines) + b"\n"
    whole = read(data, batch_size=size)
    for k, batch in enumerate(whole):
        rest = read(data, batch_size=size, start=batch.end)
        assert rows_of(rest) == rows_of(whole[k + 1 :])
        assert errors_of(rest) == errors_of(whole[k + 1 :])


def test_another_quote_character():
    data = b"a;b\n1;'x;y'\n2;'it''s'\n3;''\n4;\n5;'open\n6;z\n"
    batches = read(data, delimiter=";", quote="'")
    assert rows_of(batches) == [["1", "x;y"], ["2", "it's"], ["3", ""], ["4", None], ["6", "z"]]
    assert [(e.line, e.raw) for e in errors_of(batches)] == [(6, "5;'open")]
    assert batches[-1].end == Position(len(data), 8)


def test_a_double_quote_is_data_when_the_quote_is_another():
    assert rows_of(read(b'a,b\n"x",1\n', quote="'")) == [['"x"', "1"]]


def test_an_unusable_quote_is_refused():
    for quote in ("", "ab", "\n", ","):
        with pytest.raises(ValueError):
            read(b"a,b\n", quote=quote)
