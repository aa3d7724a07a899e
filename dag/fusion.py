"""Stage fusion: which steps run in one pass with a step that starts, and which succeeded
steps a resumed step must recompute because their output was not kept. Pure: the executor
reads the run's step states and calls these.

A fused group is a step (its head) and the pending steps that hang off it as a tree: a
follower depends on exactly one member, which is not an aggregate (an aggregate's output
exists only at its end: it is a sink of the pass, and its own followers form the next
group). Branches fuse too: every transform and export that reads a member joins, so one
pass over the head's input feeds a whole fan-out of maps, filters, aggregates and exports.
The executor runs the group batch by batch: the head's input batch goes through every
member in order (upstream before downstream), each member still with its own attempt,
counters, digests and checkpoint, all committed in one transaction per batch. A member's
output is stored only when a step outside the group reads it.

Under `stop_dependents` no group forms once a step has failed: nothing outside the groups
already started begins after a failure. A group that started before the failure is running,
all of it: its members finish (see docs/decisions.md, "Fused trees").

A group lives within a memory budget (`FUSION_BUDGET`, derived from the executor's 512 MiB
limit): `fused_peak` estimates the bytes a batch holds at its peak while it goes through the
members, from the bytes of one output batch (`BatchBytes`, measured on the head's output of
the batch), with every output released as soon as its last consumer in the group took it;
`fit_budget` keeps the followers, in order, whose joining keeps that estimate within the
budget (docs/decisions.md, "A fused group's memory budget"). Members run depth first, so a
batch holds one branch's outputs at a time.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

from dag.plan import STOP_DEPENDENTS, Plan
from dag.states import StepStatus
from dag.targets import target_of

__all__ = [
    "FUSION_BUDGET",
    "BatchBytes",
    "fit_budget",
    "fused_peak",
    "fusion_budget",
    "fusion_group",
    "replay_chain",
]

MIB = 2**20
# The executor's memory limit (the specification; Compose's `mem_limit`).
EXECUTOR_MEMORY_LIMIT = 512 * MIB
# What the executor holds besides the batches: the interpreter with its libraries, the
# sessions, the allocator's slack (an idle executor is about 60 MiB).
EXECUTOR_BASE = 96 * MIB


def fusion_budget(memory_limit: int = EXECUTOR_MEMORY_LIMIT) -> int:
    """What a fused group's batch may hold in an executor limited to `memory_limit` bytes:
    half of what the executor's own needs leave, since the previous batch's commit may still
    be in flight (it is sent while the next batch is computed) and holds as much again."""
    return max(0, (memory_limit - EXECUTOR_BASE) // 2)


FUSION_BUDGET = fusion_budget()
# Bytes of a record in memory besides its values' text: the dict and, per value, its slot
# and its object's header (measured with tracemalloc: 100 to 135 bytes per value).
RECORD_BYTES = 64
VALUE_BYTES = 100
# A kept output's rows at its batch's commit: the rows, their compressed copy and the
# query's escaped text of it (compressed data is about incompressible at the worst).
COMMIT_FACTOR = 3


class BatchBytes(NamedTuple):
    """A batch in memory: `rows`, its encoded rows (or an export's encoded chunk);
    `records`, its records (values and dicts: a transform may make every value anew)."""

    rows: int
    records: int

    @classmethod
    def measured(cls, n_records: int, n_columns: int, rows: int) -> BatchBytes:
        """The estimate for a batch of `n_records` records of `n_columns` columns whose
        encoded rows take `rows` bytes (the values' text is about the rows' length)."""
        return cls(rows, rows + n_records * (RECORD_BYTES + VALUE_BYTES * n_columns))


def _ends_group(plan: Plan, name: str) -> bool:
    """An aggregate's records come only from its `finish`: nothing fuses behind it."""
    step = plan.step(name)
    return step.type == "transform" and step.config.get("op") == "aggregate"


def fusion_group(
    plan: Plan, head: str, states: Mapping[str, str], aligned: Collection[str]
) -> tuple[str, ...]:
    """The followers to run fused with `head`, upstream before downstream, depth first
    (each branch before the next: a batch then holds one branch's outputs at a time, each
    dropped once its consumers took it); empty: none.

    `states` maps every step to its status; `aligned` names the pending steps whose
    checkpoint fits the head's (none yet with a fresh head, or the same fused position)."""
    if plan.on_failure == STOP_DEPENDENTS and StepStatus.FAILED in states.values():
        return ()
    members: list[str] = []

    def walk(name: str) -> None:  # depth first: a branch ends before the next one starts
        if _ends_group(plan, name):
            return
        for follower in plan.dependents(name):
            if (
                plan.step(follower).depends_on == (name,)
                and states.get(follower) == StepStatus.PENDING
                and follower in aligned
            ):
                members.append(follower)
                walk(follower)

    walk(head)
    return tuple(members)


def replay_chain(plan: Plan, name: str, unkept: Collection[str]) -> tuple[str, ...]:
    """The succeeded steps whose output `name` needs but nobody kept (`unkept`), farthest
    upstream first: they are recomputed from the nearest kept input and checked against
    their recorded output digest."""
    chain: list[str] = []
    step = plan.step(name)
    while len(step.depends_on) == 1 and step.depends_on[0] in unkept:
        chain.append(step.depends_on[0])
        step = plan.step(step.depends_on[0])
    return tuple(reversed(chain))


def _outputs(plan: Plan, name: str) -> bool:
    """Whether a member hands on an output batch per input batch (an aggregate only at its
    end; an export only when a step reads it)."""
    step = plan.step(name)
    return not _ends_group(plan, name) and (step.type != "export" or bool(plan.dependents(name)))


def _kept(plan: Plan, name: str, inside: Collection[str], replayed: Collection[str]) -> bool:
    """Whether a member's output batches are stored (held until the batch's commit): a
    leaf's output, or one a step outside the group reads; a table export stages its rows
    in the commit too. A replayed member stores nothing."""
    if name in replayed:
        return False
    step = plan.step(name)
    if step.type == "export":
        return target_of(step.config).stages_rows or bool(plan.dependents(name))
    dependents = plan.dependents(name)
    return not dependents or any(d not in inside for d in dependents)


def _cost(plan: Plan, name: str, batch: BatchBytes) -> int:
    """A member's output of one batch: an aggregate's comes at its end; an export passes
    its input on and encodes its chunk; any other member makes records and their rows."""
    if _ends_group(plan, name):
        return 0
    if plan.step(name).type == "export":
        return batch.rows
    return batch.records + batch.rows


def fused_peak(
    plan: Plan, members: Sequence[str], replayed: Collection[str], batch: BatchBytes
) -> int:
    """The estimated peak of the bytes one batch holds while it goes through `members` (in
    the group's order, upstream before downstream): the input batch, and each member's
    output (`_cost`) from its computation until its last consumer in the group took it (an
    export that hands nothing on drops it at once), kept outputs' rows until the commit,
    where they count `COMMIT_FACTOR` times."""
    inside = set(members)
    upstream = {
        name: plan.step(name).depends_on[0]
        for name in members
        if plan.step(name).depends_on and plan.step(name).depends_on[0] in inside
    }
    waiting = {name: 0 for name in members}
    for up in upstream.values():
        waiting[up] += 1
    cost = {name: _cost(plan, name, batch) for name in members}
    alive = peak = batch.records  # the input batch, held through the whole pass
    held = 0

    def release(name: str) -> None:
        nonlocal alive, held
        alive -= cost[name]
        if _outputs(plan, name) and _kept(plan, name, inside, replayed):
            held += batch.rows

    for name in members:
        alive += cost[name]
        peak = max(peak, alive + held)
        up = upstream.get(name)
        if up is not None:
            waiting[up] -= 1
            if waiting[up] == 0:
                release(up)
        if waiting[name] == 0:
            release(name)
    return max(peak, alive + held * COMMIT_FACTOR)


def fit_budget(
    plan: Plan,
    leading: Sequence[str],
    followers: Sequence[str],
    replayed: Collection[str],
    batch: BatchBytes,
    budget: int = FUSION_BUDGET,
) -> tuple[str, ...]:
    """The `followers` (in order) that stay in the group behind `leading` (the replayed
    members and the head, which always run). Each joins when the group with it stays within
    `budget` by `fused_peak`, counting the followers not yet decided below it in (their
    outputs pass in memory); one left out takes what hangs off it along. When the group so
    chosen is over the budget after all (a follower left out later made an output stored),
    the choice is made again counting every follower not yet decided outside, where the
    group last checked is the final one."""
    chosen = _fit(plan, leading, followers, replayed, batch, budget, hopeful=True)
    if fused_peak(plan, [*leading, *chosen], replayed, batch) <= budget:
        return chosen
    return _fit(plan, leading, followers, replayed, batch, budget, hopeful=False)


def _fit(
    plan: Plan,
    leading: Sequence[str],
    followers: Sequence[str],
    replayed: Collection[str],
    batch: BatchBytes,
    budget: int,
    *,
    hopeful: bool,
) -> tuple[str, ...]:
    members = list(leading)
    for i, name in enumerate(followers):
        if plan.step(name).depends_on[0] not in members:
            continue
        below = {name}
        if hopeful:  # the undecided followers below it, in
            for later in followers[i + 1 :]:
                if plan.step(later).depends_on[0] in below:
                    below.add(later)
        trial = {*members, *below}
        order = [m for m in [*leading, *followers] if m in trial]
        if fused_peak(plan, order, replayed, batch) <= budget:
            members.append(name)
    return tuple(name for name in followers if name in members)
