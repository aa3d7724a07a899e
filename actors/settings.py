"""An executor's settings: read by the runner, the group it forms and the endings it
records, so they live apart from all three (`actors.runner` re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from actors.faults import Faults
from dag import FUSION_BUDGET


@dataclass(frozen=True)
class ExecutorSettings:
    """Everything an executor needs besides its connections."""

    name: str
    owner: str  # name:boot id - the lease owner identity
    lease_ttl_s: float
    heartbeat_s: float
    step_timeout_s: float
    data_dir: Path
    export_dir: Path
    reject_dir: Path
    faults: Faults = field(default_factory=Faults)
    fusion: bool = True  # run the steps that hang off a step in one pass with it
    fusion_budget: int = FUSION_BUDGET  # bytes a fused group's batch may hold (`dag.fusion`)
    overlap: bool = True  # commit a batch while the next one is computed (`actors.committer`)
    sandbox_in_state: bool = False  # the sandbox is the state database: stage in the commit
