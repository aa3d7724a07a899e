"""What a preview proposes for a file ingest's dialect (dag.sniffing): the encoding and
delimiter detected in the head of the input, only where they differ from the declared."""

from __future__ import annotations

import codecs

import pytest

from dag.sniffing import detect_delimiter, detect_encoding, propose_dialect

TEXT = "id;name;city\n1;Zoë;Köln\n2;Renée;Besançon\n3;Œdipe;€-ville\n"


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        (TEXT.encode("utf-8"), "utf-8"),
        (codecs.BOM_UTF8 + TEXT.encode("utf-8"), "utf-8-sig"),
        (TEXT.encode("utf-16"), "utf-16"),
        (TEXT.encode("cp1252"), "cp1252"),
        ("id;name\n1;Zoë\n".encode("latin-1") + b"\x81", "latin-1"),
        (b"id,name\n1,a", "utf-8"),
        ("é".encode() * 5 + "é".encode()[:1], "utf-8"),  # a sequence cut by the head
    ],
)
def test_encodings_are_detected(data: bytes, encoding: str) -> None:
    assert detect_encoding(data) == encoding


def test_a_cp1252_semicolon_file_gets_both_proposed() -> None:
    proposed = propose_dialect(TEXT.encode("cp1252"), {"source": "file", "path": "x.csv"})
    assert proposed == {
        "encoding": "cp1252",
        "delimiter": ";",
        "declared": {"encoding": "utf-8", "delimiter": ","},
        "message": "the input looks like encoding 'cp1252' (declared 'utf-8'),"
        " delimiter ';' (declared ',')",
    }


@pytest.mark.parametrize(
    ("data", "config"),
    [
        (TEXT.encode("cp1252"), {"encoding": "cp1252", "delimiter": ";"}),
        (codecs.BOM_UTF8 + TEXT.encode(), {"delimiter": ";"}),  # utf-8 skips a BOM
        (b"id;name\n1;a\n", {"encoding": "latin-1", "delimiter": ";"}),  # ASCII reads alike
        (b'id,name\n1,"a;b;c"\n', {}),  # a quoted delimiter does not count
        (b"just one column\nvalue\n", {}),
        (TEXT.encode(), {"format": "jsonl"}),  # no delimiter outside csv
    ],
)
def test_nothing_is_proposed_where_the_declared_dialect_reads_it(data: bytes, config) -> None:
    assert propose_dialect(data, config) is None


def test_the_widest_consistent_split_wins_and_a_cut_last_line_is_ignored() -> None:
    assert detect_delimiter("a\tb\tc\n1\t2\t3\n4\t5", ",") == "\t"
    assert detect_delimiter("a|b,c\n1|2,3\n", ",") == ","  # a tie: the declared one
    assert detect_delimiter("a|b;c;d\n1|2;3;4\n", ",") == ";"
    assert propose_dialect(b"id,name\n1,Zo\xc3\xab\n", {"encoding": "latin-1"}) == {
        "encoding": "utf-8",
        "declared": {"encoding": "latin-1", "delimiter": ","},
        "message": "the input looks like encoding 'utf-8' (declared 'latin-1')",
    }
