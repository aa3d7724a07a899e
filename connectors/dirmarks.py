"""The identity of an output directory (`ETL_EXPORT_DIR`, `ETL_REJECT_DIR`): a random id kept
in a file at its root, written once by whoever comes first. Two executors that read the same
id see the same directory (one volume, one NFS export); two that read different ids do not,
and a step one of them staged could neither be resumed nor published by the other."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

MARK_FILE = ".etl-directory-id"


def directory_mark(directory: Path, new_id: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """The id in `directory`'s mark file, created (with the directory) if there is none.

    The file appears whole or not at all: written under a unique temporary name and linked
    into place, so of two executors creating it at once one wins and both read its id."""
    directory = Path(directory)
    mark = directory / MARK_FILE
    try:
        return _read(mark)
    except FileNotFoundError:
        pass
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{MARK_FILE}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "x", encoding="ascii") as f:
        f.write(f"{new_id().hex}\n")
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, mark)  # fails if another process linked its mark first
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return _read(mark)


def _read(mark: Path) -> str:
    text = mark.read_text(encoding="ascii").strip()
    if not text:
        raise ValueError(f"{mark}: empty directory mark (remove it and start again)")
    return text
