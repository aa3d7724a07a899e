"""A preview warning (`dag.preview`): something in a step's sample that is probably not what
the plan's author meant. Export targets (`dag.targets`) give theirs too."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PreviewWarning:
    """Something in a step's sample that is probably not what the plan's author meant."""

    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}
