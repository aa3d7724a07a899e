"""The C allocator of the API's workers (glibc's malloc), made to give back what a large
request held.

A preview may hold a 50 MiB value, and a copy or two of it for a moment. glibc serves a
block smaller than its mmap threshold from an arena, one per thread (so from the arenas of
gunicorn's thread pool), and raises that threshold by itself, up to 32 MiB, each time a
mapped block is freed: the next blocks of a few MiB then come from the arena, and what
they leave free at the top of a thread's arena stays in the process (`malloc_trim` does
not reach it). `bound_allocator` pins the threshold at `MMAP_THRESHOLD_BYTES`, so every
block that large is mapped on its own and unmapped when freed; `release_memory` gives the
free pages inside the arenas back after a large request. Both do nothing where the C
library has no such call."""

from __future__ import annotations

import ctypes

MMAP_THRESHOLD_BYTES = 1 << 20
_M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)
_LIBC = ctypes.CDLL(None)


def bound_allocator() -> bool:
    """Pin the allocator's mmap threshold (see the module docstring); True when it did."""
    mallopt = getattr(_LIBC, "mallopt", None)
    return mallopt is not None and mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1


def release_memory() -> None:
    """Give the free pages of every arena back to the system (`malloc_trim(0)`)."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)
