"""Stage fusion: which steps run in one pass with a step that starts, and which succeeded
steps a resumed step must recompute because their output was not kept. Pure: the executor
reads the run's step states and calls these.

A fused group is a step (its head) and the pending steps that hang off it as a chain: a
follower depends on exactly one member and is either an export or the only transform that
depends on that member (a branch point ends the chain: branches run as their own groups),
and no member it hangs off is an aggregate (whose output exists only at its end). The
executor runs the group batch by batch: the head's input batch goes through every member in
order, each member still with its own attempt, counters, digests and checkpoint, all
committed in one transaction per batch. A member's output is stored only when a step
outside the group reads it.

Under `stop_dependents` a group forms only when no step has failed and it holds every step of
the run that is not over yet: fused followers count as started with their head, and
"nothing new starts after a failure" must not depend on whether a step was fused (see
docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from dag.plan import STOP_DEPENDENTS, Plan
from dag.states import STEP_TERMINAL, StepStatus

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
    members = [head]
    for name in members:  # grows while it is walked: breadth first from the head
        if _ends_group(plan, name):
            continue
        dependents = plan.dependents(name)
        transforms = [d for d in dependents if plan.step(d).type == "transform"]
        for follower in dependents:
            step = plan.step(follower)
            if (
                (step.type == "export" or transforms == [follower])
                and step.depends_on == (name,)
                and states.get(follower) == StepStatus.PENDING
                and follower in aligned
            ):
                members.append(follower)
    followers = tuple(members[1:])
    if plan.on_failure == STOP_DEPENDENTS:
        open_steps = {n for n, s in states.items() if s not in STEP_TERMINAL}
        failed = StepStatus.FAILED in states.values()
        if failed or not open_steps <= {head, *followers}:
            return ()
    return followers


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
