"""An executor's name from `--name`: a replica of the compose `executor` service names itself
after its container's hostname, a local process after its pid."""

from __future__ import annotations

import pytest

from service.run.executor import executor_name


def test_a_replica_is_named_after_its_container_hostname() -> None:
    assert executor_name("executor-{hostname}", "3f2a1b4c5d6e", 7) == "executor-3f2a1b4c5d6e"


def test_the_default_is_unique_per_process_and_a_plain_name_is_kept() -> None:
    assert executor_name("executor-{pid}", "host", 4242) == "executor-4242"
    assert executor_name("executor-1", "host", 4242) == "executor-1"


def test_a_fully_qualified_hostname_gives_its_first_label() -> None:
    assert executor_name("{hostname}", "worker7.cluster.example", 1) == "worker7"


@pytest.mark.parametrize(
    "template", ["executor-{host}", "executor-{0}", "executor-{", "", "a:b", "x" * 64, "-x"]
)
def test_an_unknown_placeholder_or_a_bad_name_is_refused(template: str) -> None:
    with pytest.raises(ValueError):
        executor_name(template, "3f2a1b4c5d6e", 7)
