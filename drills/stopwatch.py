"""How long each named step of a drill took: `Stopwatch.timed(label, action)` runs
`action`, records its seconds under `label` (even when it raises) and returns its result;
the stopwatch is the dict of those figures, as the report shows them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class Stopwatch(dict[str, float]):
    def timed(self, label: str, action: Callable[[], Any]) -> Any:
        started = time.monotonic()
        try:
            return action()
        finally:
            self[label] = round(time.monotonic() - started, 2)
