"""`BoundedAnswers` against a real endpoint: a 1 GiB answer is read to 64 KiB and the
connection dropped; a body dripped a byte a second is given up after its time."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from connectors.http_answers import MAX_HTTP_ANSWER_BYTES, bounded_session
from tests.integration.endpoints import GIB, HostileEndpoint


@pytest.fixture
def huge() -> Iterator[HostileEndpoint]:
    endpoint = HostileEndpoint("huge")
    yield endpoint
    endpoint.close()


def test_a_huge_answer_is_read_to_its_bound_and_dropped(huge: HostileEndpoint) -> None:
    session = bounded_session()
    for _ in range(3):  # the pooled connection is not reused for the rest of an answer
        answer = session.post(f"{huge.url}/api/v1/lineage", data=b"{}", timeout=5)
        assert answer.status_code == 200 and len(answer.content) == MAX_HTTP_ANSWER_BYTES
    deadline = time.monotonic() + 30
    while len(huge.sent) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(huge.sent) == 3 and max(huge.sent) < 64 << 20 < GIB  # socket buffers at most


@pytest.mark.timeout(60)
def test_a_dripped_answer_is_given_up_after_its_time() -> None:
    drip = HostileEndpoint("drip")
    try:
        session = bounded_session(max_s=2.0)
        started = time.monotonic()
        answer = session.post(f"{drip.url}/v1/traces", data=b"", timeout=5)
        took = time.monotonic() - started
        assert answer.status_code == 200 and 1 <= len(answer.content) <= 4
        assert took < 2.0 + 5 + 1  # the body's time, plus at most one read's timeout
    finally:
        drip.close()
