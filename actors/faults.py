"""Fault injection for tests and drills, off unless `ETL_FAULT` names one or more faults.

Grammar: `KIND:key=value:key=value[,KIND:...]`. Kinds, named for what they do:
- `crash_after_export:step=S:batch=N[:attempt=A]` - the executor kills itself (SIGKILL)
  right after exporting batch N (1-based) of step S and before that batch's checkpoint
  commits (the batches before it committed); only in attempt A (default 1), so the
  recovery attempt goes through. A table export's batch that is staged in its commit
  (`actors.committer`) is not staged then either.
- `crash_after_publish:step=S[:attempt=A]` - the executor kills itself (SIGKILL) right
  after the export of step S published, before the step's final commit; only in attempt A
  (default 1).
- `fail_attempts:step=S:times=K` - attempts 1..K of step S fail with a transient error.
- `slow_batches:step=S:ms=M` - each batch of step S takes M ms longer (to aim kills)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from actors.errors import InjectedCrash

KINDS = ("crash_after_export", "crash_after_publish", "fail_attempts", "slow_batches")


@dataclass(frozen=True)
class Fault:
    kind: str
    params: dict[str, str]

    def applies(self, step: str) -> bool:
        return self.params.get("step") in (None, step)


@dataclass(frozen=True)
class Faults:
    """The parsed fault list; every hook is a no-op when the list is empty."""

    faults: tuple[Fault, ...] = ()

    @classmethod
    def parse(cls, spec: str | None) -> Faults:
        if not spec:
            return cls()
        faults = []
        for item in spec.split(","):
            kind, *pairs = item.strip().split(":")
            if kind not in KINDS:
                raise ValueError(f"ETL_FAULT: unknown fault {kind!r} (known: {', '.join(KINDS)})")
            params = dict(p.split("=", 1) for p in pairs)
            faults.append(Fault(kind, params))
        return cls(tuple(faults))

    def _find(self, kind: str, step: str) -> Fault | None:
        return next((f for f in self.faults if f.kind == kind and f.applies(step)), None)

    def at_attempt_start(self, step: str, attempt: int) -> None:
        fault = self._find("fail_attempts", step)
        if fault and attempt <= int(fault.params.get("times", "1")):
            raise InjectedCrash(f"injected failure of attempt {attempt} (ETL_FAULT)")

    def before_batch(self, step: str) -> None:
        fault = self._find("slow_batches", step)
        if fault:
            time.sleep(int(fault.params.get("ms", "100")) / 1000)

    def after_export(
        self, step: str, batch_number: int, attempt: int, before_kill: Callable[[], None]
    ) -> None:
        """`crash_after_export`: `before_kill` first (the executor waits for the batch
        before this one to commit), then SIGKILL."""
        fault = self._find("crash_after_export", step)
        if (
            fault
            and int(fault.params.get("batch", "1")) == batch_number
            and int(fault.params.get("attempt", "1")) == attempt
        ):
            before_kill()
            os.kill(os.getpid(), signal.SIGKILL)

    def after_publish(self, step: str, attempt: int) -> None:
        """`crash_after_publish`: SIGKILL once step `step`'s export is published."""
        fault = self._find("crash_after_publish", step)
        if fault and int(fault.params.get("attempt", "1")) == attempt:
            os.kill(os.getpid(), signal.SIGKILL)
