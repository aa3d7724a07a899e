"""What a built transform op does, one batch at a time (`dag.transforms` describes the
protocol), and the config readers the ops' builders share: a config value of the wrong shape
or a column that is not in the input raises `ConfigValueError`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dag.errors import ConfigValueError
from dag.records import RowError

Record = dict[str, Any]


class Transform:
    """A built transform: the identity, stateless; each op overrides `apply` and, when it
    streams state across batches, `state`/`restore`/`finish`."""

    output_columns: dict[str, str]

    def apply(
        self, records: Sequence[Record], first_ordinal: int = 1
    ) -> tuple[Sequence[Record], list[RowError]]:
        """The batch's output records (new dicts; the input is never mutated) and the row
        errors of records that were dropped. The ops give a `Columns` for a `Columns` whose
        records were not built (`dag.ops.columnar`); this identity gives a list."""
        return list(records), []

    def state(self) -> Any:
        """JSON-able state to put in a checkpoint (`None`: nothing to keep)."""
        return None

    def restore(self, state: Any, parts: Sequence[bytes] = ()) -> None:
        """Continue from a `state()` or `checkpoint()` state taken earlier (possibly in
        another process), with the parts stored with it, in order; `None` means from the
        start."""

    def checkpoint(self) -> tuple[Any, tuple[int, bytes] | None]:
        """After a batch: the state for its checkpoint and the part to store with it
        (its index and bytes; None: the state holds everything)."""
        return self.state(), None

    def finish(self) -> list[Record]:
        """Records emitted once the whole input went through `apply`."""
        return []


def need_columns(names: Sequence[str], input_columns: Mapping[str, str], op: str) -> None:
    for name in names:
        if name not in input_columns:
            raise ConfigValueError.missing_column(
                f"{op}: no column {name!r} in the input", name, input_columns
            )


def config_list(config: Mapping[str, Any], key: str, op: str) -> list[str]:
    value = config.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigValueError(f"{op}: {key!r} must be a list of column names")
    return list(value)


def config_str(config: Mapping[str, Any], key: str, op: str) -> str:
    value = config.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigValueError(f"{op}: {key!r} must be a column name")
    return value
