"""`split_columns` (`connectors.commit_staging`) against a model of how the server splits
its texts back (`string_to_array(text, chr(31), chr(30))` for text and date columns, an
array literal for int columns): on generated batches with nulls, empty text, white space,
the separators, NULs, lone surrogates and ints beyond 64 bits, either the texts give back
exactly the batch's values and keys, or the batch goes by another path (None), and None
only for what the texts cannot carry."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.commit_staging import FIELD_SEP, NULL_MARK, split_columns
from dag.limits import INT64_MIN

COLUMNS = {"id": "int", "name": "string", "signup": "date", "amount": "int"}
CHARS = [
    " ",
    "\n",
    ",",
    '"',
    "{",
    "}",
    "\\",
    "a",
    "é",
    "\u2003",
    "\x00",
    "\ud800",
    FIELD_SEP,
    NULL_MARK,
]
TEXT = st.one_of(
    st.text(alphabet=st.sampled_from(CHARS), max_size=6), st.sampled_from(["null", "NULL", ""])
)
INTS = st.one_of(st.integers(-5, 5), st.integers(INT64_MIN - 1, 2**64), st.none())
RECORDS = st.lists(
    st.fixed_dictionaries(
        {
            "id": INTS,
            "name": st.one_of(TEXT, st.none()),
            "signup": st.one_of(st.dates().map(lambda d: d.isoformat()), st.none()),
            "amount": st.one_of(INTS, st.sampled_from([True, "7"])),
        }
    ),
    max_size=8,
)


def _ints_back(text: str) -> list[int | None]:
    assert text[0] == "{" and text[-1] == "}"
    inner = text[1:-1]
    return [None if v == "null" else int(v) for v in inner.split(",")] if inner else []


def _texts_back(text: str) -> list[str | None]:
    return [None if v == NULL_MARK else v for v in text.split(FIELD_SEP)]


def _carried(records: list[dict], keys: list[str]) -> bool:
    """Whether the texts can carry the batch exactly."""
    if len(records) < 2:
        return False
    for name, kind in COLUMNS.items():
        for value in (r[name] for r in records):
            if value is None:
                continue
            if kind == "int" and (type(value) is not int or not INT64_MIN <= value < 2**64):
                return False
            if kind != "int" and (
                type(value) is not str
                or any(c in value for c in (FIELD_SEP, NULL_MARK, "\x00"))
                or any(0xD800 <= ord(c) <= 0xDFFF for c in value)
            ):
                return False
    return not any(FIELD_SEP in k or NULL_MARK in k or "\x00" in k for k in keys)


@settings(max_examples=400, deadline=None)
@given(RECORDS, st.booleans())
def test_the_texts_give_back_the_batch_or_it_goes_another_way(records, by_name) -> None:
    keys = [str(r["name"]) if by_name else str(i) for i, r in enumerate(records, start=1)]
    texts = split_columns(COLUMNS, records, keys)
    assert (texts is not None) == _carried(records, keys)
    if texts is None:
        return
    assert len(texts) == len(COLUMNS) + 1
    for text, (name, kind) in zip(texts, COLUMNS.items(), strict=False):
        back = _ints_back(text) if kind == "int" else _texts_back(text)
        assert back == [r[name] for r in records]
    assert texts[-1].split(FIELD_SEP) == keys


def test_one_record_goes_as_json() -> None:
    # an empty text splits into no element at all: one record alone is not split
    assert (
        split_columns(COLUMNS, [{"id": 1, "name": "", "signup": None, "amount": 2}], ["1"]) is None
    )
