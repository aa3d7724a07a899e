"""Files in other encodings than UTF-8 (connectors.transcode), read by the CSV reader: real
bytes as spreadsheets and older systems write them."""

from __future__ import annotations

import io

import pytest

from connectors import SourceUndecodable, decoded_source
from dag import read_csv_batches

ROWS = [
    ["1", "Zoë", "café"],
    ["2", "Ångström", "naïve"],
    ["3", "O\u2019Brien", "€ 5 \u2013 \u201cquoted\u201d"],  # cp1252 has these, Latin-1 not
]
TEXT = "id;name;note\r\n" + "".join(f'{a};"{b}";{c}\r\n' for a, b, c in ROWS)


def read_all(data: bytes, encoding: str, **kwargs) -> tuple[list, list]:
    with decoded_source(io.BytesIO(data), encoding) as stream:
        batches = list(read_csv_batches(stream, batch_size=2, **kwargs))
    records = [list(r.values.values()) for b in batches for r in b.records]
    return records, [(e.line, e.raw) for b in batches for e in b.row_errors]


@pytest.mark.parametrize("encoding", ["cp1252", "utf-16", "utf-8", "utf-8-sig"])
def test_a_semicolon_file_in_each_encoding_reads_as_the_utf8_one(encoding):
    data = TEXT.encode(encoding)
    assert read_all(data, encoding, delimiter=";") == (ROWS, [])


def test_latin1_bytes_are_decoded_not_rejected():
    rows = [r for r in ROWS if r[0] != "3"]  # no € or curly quotes in Latin-1
    text = "id;name;note\n" + "".join(f"{a};{b};{c}\n" for a, b, c in rows)
    data = text.encode("latin-1")
    assert b"\xeb" in data  # ë, one byte: invalid UTF-8
    assert read_all(data, "latin-1", delimiter=";") == (rows, [])
    _, errors = read_all(data, "utf-8", delimiter=";")
    assert [line for line, _ in errors] == [2, 3]  # read as UTF-8, both rows are rejected


def test_line_numbers_are_the_original_files():
    data = 'a,b\n1,"x\ny"\n2,"open\n3,z\n'.encode("utf-16")
    records, errors = read_all(data, "utf-16")
    assert records == [["1", "x\ny"], ["3", "z"]]
    assert errors == [(4, '2,"open')]


def test_an_undecodable_byte_names_its_offset():
    data = "a,b\n1,x\n".encode("cp1252") + b"2,\x81\n"  # 0x81 is undefined in cp1252
    with pytest.raises(SourceUndecodable, match=r"byte offset 10 \(0x81\)"):
        read_all(data, "cp1252")


def test_an_odd_utf16_tail_names_its_offset():
    data = "a,b\n".encode("utf-16") + b"\x31"
    with pytest.raises(SourceUndecodable, match="offset 10"):
        read_all(data, "utf-16")


def test_the_copy_is_the_same_on_every_read():
    data = TEXT.encode("cp1252")
    copies = []
    for _ in range(2):
        with decoded_source(io.BytesIO(data), "cp1252") as stream:
            copies.append(stream.read())
    assert copies[0] == copies[1] == TEXT.encode("utf-8")
