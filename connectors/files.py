"""File sources: the path guard in front of the allowed data directory.

Ingest may read only regular files inside `ETL_DATA_DIR`, named by a relative path, at most
`max_bytes` long. Symlinks are followed, but only while they stay inside the directory. A
file with more than one hard link is refused: a hard link is indistinguishable from the
file it shares, which may live outside the directory (a link made inside it to
`/etc/shadow`, or to another tenant's data), and no path check can tell."""

from __future__ import annotations

import difflib
import errno
import glob
import os
import stat
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from connectors.errors import SourceMissing, SourceRefused, SourceTooLarge
from dag.limits import MAX_SOURCE_BYTES
from dag.paths import relative_path_problem

_PROC_FD = Path("/proc/self/fd")


def _missing(root: str, rel_path: str) -> SourceMissing:
    """A missing source named with the directory it was looked for in (a typo and a
    coordinator started elsewhere look alike otherwise), and the nearest names there."""
    text = f"source file {rel_path!r} does not exist in the data directory {root} (ETL_DATA_DIR)"
    parent = PurePosixPath(rel_path).parent
    try:
        names = os.listdir(os.path.join(root, parent))
    except OSError:
        return SourceMissing(text)
    near = difflib.get_close_matches(PurePosixPath(rel_path).name, names, n=3)
    if near:
        text += "; did you mean " + " or ".join(repr(str(parent / n)) for n in near) + "?"
    return SourceMissing(text)


def open_source(data_dir: Path, rel_path: str, *, max_bytes: int = MAX_SOURCE_BYTES) -> BinaryIO:
    """Open `rel_path` under `data_dir` for binary reading (seekable, at offset 0).

    Raises `SourceRefused` for an empty or absolute path, a `..` segment, a path whose real
    path (symlinks followed) is outside `data_dir`, or anything but a regular file;
    `SourceMissing` when no such file exists; `SourceTooLarge` above `max_bytes`."""
    check_rel_path(rel_path)
    root = os.path.realpath(data_dir)
    if not os.path.isdir(root):
        raise SourceMissing(
            f"the data directory {root} (ETL_DATA_DIR) of source {rel_path!r} does not exist"
        )
    real = os.path.realpath(os.path.join(root, rel_path))
    if not _is_inside(root, real):
        raise SourceRefused(f"source path {rel_path!r} leaves the data directory")
    try:
        before = os.stat(real)
    except FileNotFoundError:
        raise _missing(root, rel_path) from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:  # the same on every attempt: not transient
            raise SourceRefused(f"source path {rel_path!r} is too long") from None
        raise
    # Refuse before opening: opening a FIFO or a device may block or have side effects.
    _check_regular(rel_path, before.st_mode)
    # O_NOFOLLOW: `real` has no symlinks left, so a link appearing now is a swap; O_NONBLOCK:
    # a file swapped for a FIFO meanwhile must not block the open.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(real, flags)
    except FileNotFoundError:
        raise _missing(root, rel_path) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SourceRefused(f"source path {rel_path!r} changed while opening") from None
        if exc.errno == errno.ENAMETOOLONG:
            raise SourceRefused(f"source path {rel_path!r} is too long") from None
        raise
    try:
        # The checks that count are on the open descriptor: no path swap can change them.
        st = os.fstat(fd)
        _check_regular(rel_path, st.st_mode)
        if st.st_nlink > 1:
            raise SourceRefused(
                f"source file {rel_path!r} has {st.st_nlink} hard links; a hard-linked file may"
                " be data from outside the data directory, so copy it in instead of linking it"
            )
        opened = _opened_path(fd)
        if opened is not None and not _is_inside(root, opened):
            raise SourceRefused(f"source path {rel_path!r} leaves the data directory")
        if st.st_size > max_bytes:
            raise SourceTooLarge(
                f"source file {rel_path!r} is {st.st_size} bytes, more than {max_bytes}"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


MAX_GLOB_FILES = 10_000


def expand_source(data_dir: Path, pattern: str) -> list[str]:
    """The relative paths an ingest `path` names: itself when it holds no glob (`*`, `?`,
    `[`), else every regular file under `data_dir` it matches, in name order (each is still
    opened through `open_source`, its own guard and size limit). `SourceRefused` for a
    pattern breaking the relative-path rule; `SourceMissing` when nothing matches."""
    if not glob.has_magic(pattern):
        return [pattern]
    check_rel_path(pattern)
    root = os.path.realpath(data_dir)
    if not os.path.isdir(root):
        raise SourceMissing(f"data directory of source {pattern!r} does not exist")
    found = sorted(
        name
        for name in glob.glob(pattern, root_dir=root)
        if os.path.isfile(os.path.join(root, name))
    )
    if not found:
        raise SourceMissing(f"no source file matches {pattern!r}")
    if len(found) > MAX_GLOB_FILES:
        raise SourceRefused(f"{pattern!r} matches {len(found)} files, more than {MAX_GLOB_FILES}")
    return found


def check_rel_path(rel_path: str) -> PurePosixPath:
    """The relative path `rel_path` as a `PurePosixPath`; `SourceRefused` when it breaks the
    relative-path rule (`dag.paths`): empty, absolute, a `..` segment, a NUL byte."""
    if not isinstance(rel_path, str):
        raise SourceRefused(f"source path {rel_path!r} is not a string")
    if (problem := relative_path_problem(rel_path)) is not None:
        raise SourceRefused(f"source path {rel_path!r} {problem}")
    return PurePosixPath(rel_path)


def _check_regular(rel_path: str, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise SourceRefused(f"source path {rel_path!r} is a directory, not a file")
    if not stat.S_ISREG(mode):
        raise SourceRefused(f"source path {rel_path!r} is not a regular file")


def _is_inside(root: str, path: str) -> bool:
    """True when `path` is strictly below `root` (both absolute, symlink-free)."""
    return path != root and os.path.commonpath([root, path]) == root


def _opened_path(fd: int) -> str | None:
    """The kernel's path of an open descriptor (Linux), or None where unavailable."""
    try:
        return os.readlink(_PROC_FD / str(fd))
    except OSError:
        return None
