"""Digests: the documented encoding (version 2), order sensitivity, batch boundaries.

Property tests use hypothesis with `max_examples=200, deadline=None`.
"""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from dag.digest import (
    DIGEST_SEED,
    chain_bytes,
    chain_rows,
    encode_names,
    encode_rows,
)
from dag.types import INT64_MAX, INT64_MIN
from tests.unit.jsonvalues import STANDARD, VALUES

PROPERTY = settings(max_examples=200, deadline=None)
NAMES = ["id", "name", "day"]


def chain(prev: str, records: list[dict], names=NAMES) -> str:
    return chain_rows(prev, names, encode_rows(records, names))


def test_seed_is_the_documented_value():
    assert hashlib.sha256(b"etl-digest-v2").hexdigest() == DIGEST_SEED


def test_encoding_is_compact_utf8_json_rows_in_column_order():
    records = [{"name": 'Müller "M"', "id": 7, "note": None}, {"id": 8}]
    rows = encode_rows(records, ["id", "name", "note"])
    assert rows == '[[7,"Müller \\"M\\"",null],[8,null,null]]'.encode()
    assert encode_names(["id", "name"]) == b'["id","name"]\n'


def test_one_step_of_the_chain_by_hand():
    expected = hashlib.sha256(
        bytes.fromhex(DIGEST_SEED) + '["a","b"]\n[["é",1]]'.encode()
    ).hexdigest()
    assert chain_rows(DIGEST_SEED, ["a", "b"], '[["é",1]]'.encode()) == expected


def test_pinned_value_stays_the_same_across_versions():
    # A fixed vector: if this changes, digests stored earlier no longer compare.
    records = [{"id": 1, "name": "Ann"}, {"id": 2, "name": None}, {"day": "2024-01-01"}]
    assert (
        chain(DIGEST_SEED, records)
        == "427df844d918f8a17f1f4450e9091e550efd6d217f30748b93de48167798eef5"
    )


def test_an_empty_batch_keeps_the_digest():
    assert chain(DIGEST_SEED, []) == DIGEST_SEED
    assert chain_rows(DIGEST_SEED, NAMES, None) == DIGEST_SEED


def test_order_and_column_names_matter():
    a, b = {"id": 1}, {"id": 2}
    assert chain(DIGEST_SEED, [a, b]) != chain(DIGEST_SEED, [b, a])
    assert chain(DIGEST_SEED, [a], ["id"]) != chain(DIGEST_SEED, [{"key": 1}], ["key"])


def test_values_are_not_merged_across_records_or_types():
    assert chain(DIGEST_SEED, [{"id": "1"}, {"id": "2"}]) != chain(DIGEST_SEED, [{"id": "12"}])
    assert chain(DIGEST_SEED, [{"id": ""}]) != chain(DIGEST_SEED, [{"id": None}])
    assert chain(DIGEST_SEED, [{"id": 1}]) != chain(DIGEST_SEED, [{"id": "1"}])


def test_batch_boundaries_are_part_of_the_digest():
    # Batches end where the input batches end (deterministic); the chain records them.
    whole = chain(DIGEST_SEED, [{"id": 1}, {"id": 2}])
    split = chain(chain(DIGEST_SEED, [{"id": 1}]), [{"id": 2}])
    assert whole != split


def test_lone_surrogates_are_encodable():
    assert len(chain(DIGEST_SEED, [{"name": "\ud800"}])) == 64


def test_raw_bytes_chain():
    expected = hashlib.sha256(bytes.fromhex(DIGEST_SEED) + b"a,b\n").hexdigest()
    assert chain_bytes(DIGEST_SEED, b"a,b\n") == expected


RECORDS = st.lists(
    st.dictionaries(
        st.sampled_from(NAMES), st.none() | st.integers(INT64_MIN, INT64_MAX) | st.text(max_size=5)
    ),
    max_size=30,
)


@PROPERTY
@given(RECORDS)
def test_property_stored_bytes_give_the_digest_of_the_records(records):
    # A step that passes its input on digests the bytes it read: the same value.
    stored = encode_rows(records, NAMES)
    assert chain_rows(DIGEST_SEED, NAMES, stored) == chain(DIGEST_SEED, records)


@PROPERTY
@given(RECORDS.filter(lambda r: len({encode_rows([x], NAMES) for x in r}) > 1), st.randoms())
def test_property_a_different_order_gives_a_different_digest(records, rnd):
    def texts(rs: list[dict]) -> list[bytes]:
        return [encode_rows([x], NAMES) for x in rs]

    shuffled = list(records)
    while texts(shuffled) == texts(records):
        rnd.shuffle(shuffled)
    assert chain(DIGEST_SEED, shuffled) != chain(DIGEST_SEED, records)


# --- orjson writes the standard encoder's bytes --------------------------------------------


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(VALUES, VALUES, VALUES), max_size=8))
def test_property_the_canonical_bytes_are_the_standard_encoders(rows):
    """`encode_rows` (orjson, falling back to the standard encoder) gives the bytes of the
    documented encoding, so digests and stored batches are those of version 2 (orjson is
    not used to read them back: it reads an int beyond 64 bits as a float)."""
    names = ["a", "b", "c"]
    records = [dict(zip(names, row, strict=True)) for row in rows]
    expected = STANDARD([list(row) for row in rows]).encode("utf-8", "surrogatepass")
    assert encode_rows(records, names) == expected
