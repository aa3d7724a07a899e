"""Every benchmark module imports with the product's and the tests' dependencies alone (the
peers of the `bench` extra are imported where they are used): a name one bench takes from
another that went away fails here, not when someone next runs it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize(
    "module", sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")
)
def test_a_bench_module_imports(module: str) -> None:
    importlib.import_module(f"bench.{module}")
