"""Reading ahead (`actors.prefetch.ReadAhead`): the same items in order, errors where the
source stopped, a bounded lead, and a source closed in its thread when the step leaves."""

from __future__ import annotations

import threading
import time

import pytest

from actors.prefetch import ReadAhead


def test_items_come_in_order_and_the_source_ends_in_its_own_thread():
    seen: list[str] = []

    def source():
        try:
            yield from range(10)
        finally:
            seen.append(threading.current_thread().name)

    with ReadAhead(source(), depth=2, name="reader") as ahead:
        assert list(ahead) == list(range(10))
    assert seen == ["reader"]


def test_an_error_of_the_source_is_raised_after_the_items_before_it():
    def source():
        yield 1
        yield 2
        raise ValueError("line 3: malformed")

    got = []
    with ReadAhead(source(), depth=1) as ahead, pytest.raises(ValueError, match="line 3"):
        for item in ahead:
            got.append(item)
    assert got == [1, 2]


def test_the_producer_stays_at_most_depth_items_ahead():
    made: list[int] = []

    def source():
        for i in range(100):
            made.append(i)
            yield i

    with ReadAhead(source(), depth=2) as ahead:
        items = iter(ahead)
        assert next(items) == 0
        time.sleep(0.3)  # time enough to run far ahead, were it allowed
        # one taken, two queued, one made and waiting for room
        assert len(made) <= 1 + 2 + 1


def test_leaving_early_stops_the_producer_and_closes_the_source():
    closed = threading.Event()

    def source():
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    ahead = ReadAhead(source(), depth=2)
    with ahead:
        for item in ahead:
            if item == 3:
                break
    assert closed.is_set()
    assert not ahead._thread.is_alive()


def test_a_source_never_read_starts_no_thread():
    with ReadAhead(iter([1]), depth=1) as ahead:
        pass
    assert not ahead._thread.is_alive()
