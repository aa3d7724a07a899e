"""Tooling that drives the platform from outside, like a user or an operator would: the
local topology and its API client (`harness`), the failure drills and their report
(`scenarios`, `topology`, `memory`, `report`, `workload`), the compose drill on Docker Engine
(`compose`, `engine`, `standins`) and `make demo` (`demo`).
`bench/` and the integration tests use the same harness."""

from drills.harness import (
    ADMIN_TOKEN,
    FAST_TIMINGS,
    ROOT,
    ApiClient,
    Stack,
    concurrently,
    drop_database,
    free_port,
    run_sql,
    wait_until,
)

__all__ = [
    "ADMIN_TOKEN",
    "FAST_TIMINGS",
    "ROOT",
    "ApiClient",
    "Stack",
    "concurrently",
    "drop_database",
    "free_port",
    "run_sql",
    "wait_until",
]
