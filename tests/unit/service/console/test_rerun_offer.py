"""The run page's Rerun offer (service.console.rerun.rerun_offer), plain values in: only for
a failed run of a live pipeline with a newer revision, naming the revision each button uses
and the steps that failed on their input (a resume of those can only fail again)."""

from __future__ import annotations

from service.console.rerun import rerun_offer


def _run(status: str = "failed", outcome: str = "input_error") -> dict:
    attempts = [{"number": 1, "outcome": outcome}]
    return {
        "status": status,
        "revision": 1,
        "steps": [
            {"name": "read", "status": "failed", "attempts": attempts},
            {"name": "out", "status": "upstream_failed", "attempts": []},
        ],
    }


def test_an_input_error_after_the_plan_was_fixed_offers_rerun_on_the_current_revision() -> None:
    assert rerun_offer(_run(), 3, False) == {
        "resume_revision": 1,
        "rerun_revision": 3,
        "input_error_steps": ["read"],
    }


def test_a_failure_that_a_resume_may_mend_names_no_step() -> None:
    assert rerun_offer(_run(outcome="failed"), 2, False) == {
        "resume_revision": 1,
        "rerun_revision": 2,
        "input_error_steps": [],
    }


def test_no_offer_without_a_newer_revision_a_failure_or_a_live_pipeline() -> None:
    assert rerun_offer(_run(), 1, False) is None  # the same plan: a rerun changes nothing
    assert rerun_offer(_run(status="succeeded"), 2, False) is None
    assert rerun_offer(_run(), 2, True) is None  # a deleted pipeline takes no run
