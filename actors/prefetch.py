"""Reading ahead: a step's input batches produced by a thread of their own, at most `depth`
batches ahead of the step.

The attempt's thread spends much of a batch waiting for the databases (the export's COPY,
the batch's commit), and psycopg2 lets go of the GIL while it waits; a file's next batch
(read, split, typed) is made in that time instead of after it. Only a source that touches
no connection the attempt uses may be read ahead (a file, or a sandbox table on a
connection of its own; not the committed outputs read on the state connection). What the
step sees does not change: the same batches, in order, with the same positions, and an
error of the source (a malformed file, a lost connection) is raised where the step takes
the batch that it stopped at."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

_DONE = object()  # the source is exhausted
_POLL_S = 0.1  # how often a blocked producer looks whether the consumer went away


class ReadAhead(Generic[T]):
    """Iterate `source` in a daemon thread, at most `depth` items ahead. Use as a context
    manager: leaving it (the step ended, failed or was canceled) stops the thread and
    closes the source there, so no read outlives the attempt."""

    def __init__(self, source: Iterable[T], depth: int = 2, name: str = "read-ahead"):
        self._source = source
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name=name, daemon=True)
        self._started = False

    def __enter__(self) -> ReadAhead[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[T]:
        if not self._started:
            self._started = True
            self._thread.start()
        while True:
            kind, item = self._queue.get()
            if kind is _DONE:
                return
            if kind is BaseException:
                raise item
            yield item

    def close(self) -> None:
        """Stop the producer (it closes the source) and wait for it."""
        self._stop.set()
        if self._started:
            self._thread.join()

    def _produce(self) -> None:
        iterator = iter(self._source)
        try:
            for item in iterator:
                if not self._put((None, item)):
                    return
            self._put((_DONE, None))
        except BaseException as exc:  # handed to the consumer, raised where it reads
            self._put((BaseException, exc))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()  # a generator's `with` blocks end in this thread

    def _put(self, entry: tuple) -> bool:
        """Queue `entry` unless the consumer went away (False then)."""
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False
