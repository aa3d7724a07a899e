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
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from dag.plan import STOP_DEPENDENTS, Plan
from dag.states import StepStatus

__all__ = ["fusion_group", "replay_chain"]


def _ends_group(plan: Plan, name: str) -> bool:
    """An aggregate's records come only from its `finish`: nothing fuses behind it."""
    step = plan.step(name)
    return step.type == "transform" and step.config.get("op") == "aggregate"


def fusion_group(
    plan: Plan, head: str, states: Mapping[str, str], aligned: Collection[str]
) -> tuple[str, ...]:
    """The followers to run fused with `head`, upstream before downstream (empty: none).

    `states` maps every step to its status; `aligned` names the pending steps whose
    checkpoint fits the head's (none yet with a fresh head, or the same fused position)."""
    if plan.on_failure == STOP_DEPENDENTS and StepStatus.FAILED in states.values():
        return ()
    members = [head]
    for name in members:  # grows while it is walked: breadth first from the head
        if _ends_group(plan, name):
            continue
        for follower in plan.dependents(name):
            if (
                plan.step(follower).depends_on == (name,)
                and states.get(follower) == StepStatus.PENDING
                and follower in aligned
            ):
                members.append(follower)
    return tuple(members[1:])


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
