"""Retry decisions (dag.retry).

Hypothesis settings: max_examples=200, deadline=None (see SETTINGS).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dag.errors import (
    ConfigValueError,
    CsvFormatError,
    DagError,
    InputDataError,
    Int64OverflowError,
    PlanInvalid,
    RowValueError,
)
from dag.retry import RETRY_DELAYS_S, RetryDecision, decide_retry, is_input_data_error

SETTINGS = settings(max_examples=200, deadline=None)


class SourceRefused(InputDataError):
    """Stands in for a connector's refusal (missing file, file too large)."""


INPUT_ERRORS = [
    InputDataError("bad"),
    CsvFormatError("unterminated quote", line=3),
    RowValueError("not an int", line=2, column="id"),
    Int64OverflowError("sum overflows int64"),
    ConfigValueError("no column 'x'"),
    SourceRefused("file too large"),
]
TRANSIENT_ERRORS = [
    RuntimeError("boom"),
    TimeoutError("step timed out"),
    OSError("disk hiccup"),
    ConnectionError("database went away"),
    DagError("core bug"),
    PlanInvalid([]),
]


def test_retry_delays_are_fixed() -> None:
    assert RETRY_DELAYS_S == (1.0, 2.0)


def test_three_attempts_with_one_and_two_seconds_between() -> None:
    error = RuntimeError("boom")
    assert decide_retry(error, 1, 3) == RetryDecision(retry=True, delay_s=1.0)
    assert decide_retry(error, 2, 3) == RetryDecision(retry=True, delay_s=2.0)
    assert decide_retry(error, 3, 3) == RetryDecision(retry=False, delay_s=0.0)


@pytest.mark.parametrize(
    ("attempt", "max_attempts", "expected"),
    [
        (1, 1, RetryDecision(False)),
        (1, 2, RetryDecision(True, 1.0)),
        (2, 2, RetryDecision(False)),
        (4, 3, RetryDecision(False)),
    ],
)
def test_max_attempts_limits_the_retries(
    attempt: int, max_attempts: int, expected: RetryDecision
) -> None:
    assert decide_retry(RuntimeError("x"), attempt, max_attempts) == expected


def test_max_attempts_above_three_is_capped() -> None:
    assert decide_retry(RuntimeError("x"), 2, 10) == RetryDecision(True, 2.0)
    assert decide_retry(RuntimeError("x"), 3, 10) == RetryDecision(False)


@pytest.mark.parametrize("attempt", [0, -1])
def test_attempt_numbers_start_at_one(attempt: int) -> None:
    with pytest.raises(ValueError, match="attempt_number"):
        decide_retry(RuntimeError("x"), attempt, 3)


@pytest.mark.parametrize("error", INPUT_ERRORS, ids=lambda e: type(e).__name__)
def test_input_data_errors_are_final_at_once(error: Exception) -> None:
    assert is_input_data_error(error)
    assert decide_retry(error, 1, 3) == RetryDecision(retry=False, delay_s=0.0)


@pytest.mark.parametrize("error", TRANSIENT_ERRORS, ids=lambda e: type(e).__name__)
def test_other_errors_are_retried(error: Exception) -> None:
    assert not is_input_data_error(error)
    assert decide_retry(error, 1, 3) == RetryDecision(retry=True, delay_s=1.0)


def test_an_input_error_raised_from_another_is_classified_by_its_own_type() -> None:
    try:
        try:
            raise CsvFormatError("bad quote", line=1)
        except CsvFormatError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as wrapped:
        assert not is_input_data_error(wrapped)


@SETTINGS
@given(
    st.sampled_from(INPUT_ERRORS + TRANSIENT_ERRORS),
    st.integers(1, 3),
    st.lists(st.sampled_from(INPUT_ERRORS + TRANSIENT_ERRORS), min_size=3, max_size=3),
)
def test_a_step_never_runs_more_than_max_attempts(
    first: Exception, max_attempts: int, later: list[Exception]
) -> None:
    """Simulate failing attempts: count them and add up the waits."""
    errors = [first, *later]
    attempts, waited_s = 0, 0.0
    for number, error in enumerate(errors, start=1):
        attempts += 1
        decision = decide_retry(error, number, max_attempts)
        assert decision.retry == (not is_input_data_error(error) and number < max_attempts)
        if not decision.retry:
            assert decision.delay_s == 0.0
            break
        assert decision.delay_s == RETRY_DELAYS_S[number - 1]
        waited_s += decision.delay_s
    assert attempts <= max_attempts
    assert waited_s <= sum(RETRY_DELAYS_S[: max_attempts - 1])
