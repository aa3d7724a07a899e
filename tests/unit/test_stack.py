"""Static checks of the Docker Swarm stack (docker-stack.yml) against the Compose file: the
same services, image, command and environment; the policies Swarm reads from `deploy:`.
`etl drill swarm` deploys it for real (docs/swarm.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def stack() -> dict:
    return _load("docker-stack.yml")


@pytest.fixture(scope="module")
def compose() -> dict:
    return _load("docker-compose.yml")


def test_the_same_services_command_and_environment_as_compose(stack, compose) -> None:
    assert set(stack["services"]) == set(compose["services"])
    for name in ("coordinator", "executor"):
        ours, theirs = stack["services"][name], compose["services"][name]
        assert ours.get("command") == theirs.get("command"), name
        assert ours.get("entrypoint") == theirs.get("entrypoint"), name
        assert ours["environment"] == theirs["environment"], name


def test_executors_are_replicated_restarted_and_rolled_out_one_by_one(stack) -> None:
    deploy = stack["services"]["executor"]["deploy"]
    assert deploy["replicas"] == 2
    assert deploy["restart_policy"]["condition"] == "any"
    update = deploy["update_config"]
    assert (update["parallelism"], update["order"], update["failure_action"]) == (
        1, "stop-first", "rollback"
    )  # fmt: skip
    assert deploy["resources"]["limits"]["memory"] == "512M"
    assert "hostname" not in stack["services"]["executor"], "one name per task: no hostname"


def test_one_coordinator_and_postgres_on_a_volume(stack) -> None:
    assert stack["services"]["coordinator"]["deploy"]["replicas"] == 1
    postgres = stack["services"]["postgres"]
    assert "pgdata:/var/lib/postgresql/data" in postgres["volumes"]
    assert postgres["environment"]["POSTGRES_DB"] == "etl"
    assert set(stack["volumes"]) == {"pgdata", "exports", "rejects"}


def test_no_key_swarm_ignores(stack) -> None:
    for name, svc in stack["services"].items():
        for key in ("build", "depends_on", "mem_limit", "restart", "container_name"):
            assert key not in svc, f"service {name!r}: `docker stack deploy` ignores `{key}`"
