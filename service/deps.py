"""What the API's resources are built on: the database, the advancer's wake-up, the clock and
the id generator, injected so that tests control time and ids without monkeypatching."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from service.config import Config
from service.db import Database


def now_utc() -> datetime:
    """The production clock: an aware UTC datetime."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Deps:
    """What the resources need. `wake_run(run_id, trace_id)` asks the dag-advancer to look
    at a run; `now` and `new_id` are injected so tests control time and ids."""

    db: Database
    wake_run: Callable[[str, str], None]
    now: Callable[[], datetime] = now_utc
    new_id: Callable[[], uuid.UUID] = uuid.uuid4
    config: Config = field(default_factory=Config)  # directories and sandbox of previews
