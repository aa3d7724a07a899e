"""The readers of a batch in `dag` given an unbuilt `Columns` read it by column, build no
record and give exactly what they give for the same records as dicts: the digest bytes
(`encode_rows`, which a resumed attempt must reproduce), the data checks' counts and
examples and the unique checks' key digests (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.builds import BuildCounter
from dag import DIGEST_SEED, Checker, Columns, chain_rows, encode_rows, key_digests
from dag.columns import record_at
from tests.unit.columnbatches import batches, both, outcome


@settings(max_examples=300)
@given(batches(), st.data())
def test_encode_rows_of_columns_are_the_bytes_of_the_records(batch, data) -> None:
    names, columns = batch
    by_column, records = both(names, columns)
    # a subset, a missing column and another order: the digest's names are the step's
    asked = data.draw(st.lists(st.sampled_from([*names, "missing"]), unique=True))
    got = outcome(encode_rows, by_column, asked)
    assert got == outcome(encode_rows, records, asked)
    assert not by_column.built
    if got[0] == "ok" and asked:
        assert chain_rows(DIGEST_SEED, asked, got[1]) == chain_rows(
            DIGEST_SEED, asked, encode_rows(records, asked)
        )


def test_encode_rows_of_columns_without_names_is_a_row_per_record() -> None:
    batch = Columns(["a"], [[1, None]])
    assert encode_rows(batch, []) == encode_rows([{"a": 1}, {"a": None}], []) == b"[[],[]]"


def _checks(names: list[str]) -> list[dict]:
    first = names[0]
    return [
        {"check": "not_null", "columns": names},
        {"check": "accepted_values", "column": first, "values": ["a", 1, "", "é€😀"]},
        {"check": "range", "column": first, "min": -5, "max": 2**40},
        {"check": "unique", "columns": names[:2]},
    ]


@settings(max_examples=300)
@given(batches(min_records=1).filter(lambda b: b[0]))
def test_checks_and_key_digests_of_columns_are_those_of_the_records(batch) -> None:
    names, columns = batch
    by_column, records = both(names, columns)
    states = []
    for given_batch in (by_column, records):
        checker = Checker(_checks(names))
        got = outcome(checker.observe, given_batch, 7, list(range(100, 100 + len(records))))
        states.append((got, checker.state()))
    assert states[0] == states[1]
    keys = names[:2]
    assert outcome(key_digests, by_column, keys) == outcome(key_digests, records, keys)
    assert not by_column.built


def test_record_at_builds_one_record_alone() -> None:
    batch = Columns(["a", "b"], [[1, 2], ["x", None]])
    assert record_at(batch, 1) == {"a": 2, "b": None} and not batch.built
    records = [{"a": 1}]
    assert record_at(records, 0) is records[0]


def test_the_build_counter_counts_each_batch_built_once() -> None:
    batch, other = Columns(["a"], [[1, 2]]), Columns(["a"], [[3]])
    with BuildCounter() as counter:
        encode_rows(batch, ["a"])
        assert counter.total == 0
        list(batch), batch[0], list(other)
    assert counter.total == 2
    assert {place.rsplit(":", 1)[1] for _, place in counter.builds} == {
        "test_the_build_counter_counts_each_batch_built_once"
    }
    list(Columns(["a"], [[1]]))  # uninstalled: no longer counted
    assert counter.total == 2
