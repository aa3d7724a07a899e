"""Errors of the execution engine."""

from __future__ import annotations

from dag import InputDataError


class ActorError(Exception):
    """Base class of every error raised by `actors`."""


class LeaseLost(ActorError):
    """Our lease on a step attempt was taken over: stop without committing anything."""


class StagingRefused(ActorError):
    """A batch's staging rows, sent with its commit, were refused: compute it again and stage
    it by the table export's per-batch path, which reports what was wrong as row errors."""


class StepTimeout(ActorError):
    """The attempt ran past the step timeout (retryable)."""


class StepCanceled(ActorError):
    """The run was canceled: the attempt stops at a batch boundary."""


class ExecutorStopping(ActorError):
    """The executor is shutting down: hand the lease back at a batch boundary."""


class DirectoryMismatch(ActorError):
    """An executor sees other export or reject directories than the live executors: it must
    not start (a step one staged could be neither resumed nor published by the other)."""


class ListenSilent(ActorError):
    """LISTEN on the consumers' URL hears no NOTIFY (a transaction pooler in between): the
    process must not start, its wake-ups would never come."""


class InjectedCrash(ActorError):
    """A fault injected for tests and drills (a transient, retryable failure)."""


class PreviewTimeLimit(ActorError):
    """A preview ran past its time limit; it stops within a batch (every few records)."""


class PreviewBudgetExceeded(ActorError):
    """The records a preview holds for the steps still to come passed its memory budget."""


class ReplayMismatch(ActorError, InputDataError):
    """A recomputed upstream output differs from its recorded one: its input changed since."""
