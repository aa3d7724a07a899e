"""The modules of a registry package (export targets, ingest sources, and their
implementations): every module of the package but the one declaring what it registers, in
the order of their names, so a new entry is one new module and no list to edit."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType


def registered_modules(package: str, path: Iterable[str], declaration: str) -> list[ModuleType]:
    """The modules of `package` (its `__name__`, its `__path__`) but `declaration`, imported,
    in the order of their names."""
    names = sorted(info.name for info in pkgutil.iter_modules(path))
    return [importlib.import_module(f"{package}.{name}") for name in names if name != declaration]
