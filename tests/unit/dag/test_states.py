"""`attempts_that_ran`: the attempts the faces show as a step's own."""

from __future__ import annotations

from dag import attempts_that_ran

RELEASED_FUSED = {"number": 1, "outcome": "released", "fused_into": "read"}
RELEASED_OWN = {"number": 1, "outcome": "released", "fused_into": None}
FAILED_FUSED = {"number": 2, "outcome": "failed", "fused_into": "read"}


def test_a_step_that_never_ran_drops_the_fused_attempt_it_was_released_from() -> None:
    for status in ("upstream_failed", "not_run"):
        assert attempts_that_ran(status, [RELEASED_FUSED, FAILED_FUSED]) == [FAILED_FUSED]
        assert attempts_that_ran(status, [RELEASED_OWN]) == [RELEASED_OWN]


def test_a_step_that_ran_keeps_every_attempt() -> None:
    for status in ("succeeded", "failed", "running", "pending", "canceled", "retry_wait"):
        assert attempts_that_ran(status, [RELEASED_FUSED]) == [RELEASED_FUSED]
