"""Distinct short labels of step names (`dag.labels`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dag.labels import ELLIPSIS, distinct_labels, middle_cut


def test_a_name_that_fits_stays_whole_and_a_long_one_is_cut_in_the_middle() -> None:
    assert middle_cut("short", 10) == "short"
    cut = middle_cut("extract_customers_from_the_crm_export", 24)
    assert len(cut) == 24 and cut.startswith("extract_customer") and cut.endswith("export")
    assert ELLIPSIS in cut


def test_names_the_usual_cut_would_merge_get_labels_that_differ() -> None:
    a, b = "load_" + "x" * 40 + "_part_one_a", "load_" + "x" * 40 + "_part_two_a"
    labels = distinct_labels([a, b, "c"], 16)
    assert labels["c"] == "c" and labels[a] != labels[b]
    assert all(len(v) <= 16 for v in labels.values())


@given(
    st.lists(st.text(alphabet="ab_", min_size=1, max_size=40), min_size=1, max_size=12),
    st.integers(min_value=4, max_value=30),
)
def test_labels_are_always_distinct_and_within_the_limit(names: list[str], limit: int) -> None:
    labels = distinct_labels(names, limit)
    assert set(labels) == set(names)
    assert len(set(labels.values())) == len(labels)
    assert all(len(v) <= limit for v in labels.values())
    assert all(labels[n] == n for n in names if len(n) <= limit)
