"""Retry decision for a failed step attempt.

At most three attempts: the first at once, the second 1 s after the first failure, the third
2 s after the second. An input-data error (the `InputDataError` family) is final at once:
the same input would fail the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from dag.errors import InputDataError
from dag.limits import MAX_ATTEMPTS, RETRY_DELAYS_S


@dataclass(frozen=True)
class RetryDecision:
    """Whether to try the step again, and after how many seconds."""

    retry: bool
    delay_s: float = 0.0


def is_input_data_error(error: BaseException) -> bool:
    """True for the `InputDataError` family (bad input: never retried)."""
    return isinstance(error, InputDataError)


def decide_retry(error: BaseException, attempt_number: int, max_attempts: int) -> RetryDecision:
    """What to do after attempt `attempt_number` (1-based) of a step failed with `error`.

    Retries while `attempt_number < max_attempts` (capped at `MAX_ATTEMPTS`), unless the
    error is an input-data error. Raises ValueError for a non-positive `attempt_number`.
    """
    if attempt_number < 1:
        raise ValueError(f"attempt_number must be >= 1, got {attempt_number}")
    if is_input_data_error(error):
        return RetryDecision(retry=False)
    if attempt_number >= min(max_attempts, MAX_ATTEMPTS):
        return RetryDecision(retry=False)
    return RetryDecision(retry=True, delay_s=RETRY_DELAYS_S[attempt_number - 1])
