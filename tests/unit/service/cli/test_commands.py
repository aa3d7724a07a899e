"""The `etl` command table: every entry names a module and functions that exist, `etl --help`
lists every command, and the API client commands load none of the server side (checked in
a fresh interpreter, where nothing else has imported them)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest

from service.cli.main import COMMANDS, build_parser

SERVER_SIDE = (
    "dramatiq", "dramatiq_pg", "psycopg2", "apscheduler", "falcon", "marshmallow", "actors", "ddl"
)  # fmt: skip
PROBE = """
import importlib, sys
from service.cli.main import COMMANDS, build_parser
argv = sys.argv[1:]
build_parser(argv).parse_args(argv)
importlib.import_module(COMMANDS[argv[0]].module)
print(" ".join(sorted(m for m in {server} if m in sys.modules)) or "-")
"""


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_names_functions_that_exist(name: str) -> None:
    command = COMMANDS[name]
    module = importlib.import_module(command.module)
    assert callable(getattr(module, command.run))
    if command.configure is not None:
        assert callable(getattr(module, command.configure))


def test_help_lists_every_command_with_its_help_line(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser(["--help"]).parse_args(["--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    for name, command in COMMANDS.items():
        assert name in shown and command.help.split(" (")[0] in shown


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "list"],
        ["runs", "watch", "00000000-0000-0000-0000-000000000000"],
        ["run", "customers", "--wait"],
        ["pipelines", "list"],
        ["schedules", "list", "customers"],
        ["token", "list"],
        ["webhooks", "list", "customers"],
    ],
)
def test_the_api_client_commands_load_nothing_of_the_server(argv: list[str]) -> None:
    code = PROBE.format(server=repr(SERVER_SIDE))
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["-"], out.stdout


def test_a_server_command_does_load_the_server_side() -> None:
    """The probe can see a loaded package (so the test above cannot pass vacuously)."""
    code = PROBE.format(server=repr(SERVER_SIDE))
    out = subprocess.run(
        [sys.executable, "-c", code, "executor", "--name", "x"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "dramatiq" in out.stdout.split() and "psycopg2" in out.stdout.split()


def test_the_webhook_events_of_the_client_are_the_api_s() -> None:
    """`etl webhooks add` offers (and defaults to) the events the API accepts: the client
    cannot import the server's schema, so its copy is held to it here."""
    from service.client.webhooks import EVENTS
    from service.schemas.requests import WEBHOOK_EVENTS

    assert EVENTS == WEBHOOK_EVENTS


def test_version_prints_the_installed_version(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser(["--version"]).parse_args(["--version"])
    assert done.value.code == 0
    assert re.fullmatch(r"etl \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)
