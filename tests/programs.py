"""The programs the tests drive besides Python and PostgreSQL, and where each is found: its
environment variable when set, else the first of its names on the PATH. A test that needs a
missing one fails (never skips) with one line saying what to install, per platform.
README.md ("Running the tests") lists the same."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Program:
    """An external program: the variable that names its path, the names it goes by on a
    PATH, and how to install it."""

    env: str
    names: tuple[str, ...]
    install: str


PROGRAMS = {
    "chromium": Program(
        "ETL_TEST_CHROMIUM",
        ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"),
        "Debian/Ubuntu: apt-get install chromium; Fedora: dnf install chromium; macOS: brew"
        " install --cask chromium (then ETL_TEST_CHROMIUM=/Applications/Chromium.app/Contents"
        "/MacOS/Chromium); the browser tests never download one",
    ),
    "promtool": Program(
        "ETL_TEST_PROMTOOL",
        ("promtool",),
        "Debian/Ubuntu: apt-get install prometheus; Fedora: dnf install golang-github-prometheus;"
        " macOS: brew install prometheus; or a release from https://prometheus.io/download/",
    ),
    "prometheus": Program(
        "ETL_TEST_PROMETHEUS",
        ("prometheus",),
        "Debian/Ubuntu: apt-get install prometheus; Fedora: dnf install golang-github-prometheus;"
        " macOS: brew install prometheus; or a release from https://prometheus.io/download/",
    ),
}


class ProgramMissing(Exception):
    """A program the tests need is not installed (or not where its variable says)."""


def find_program(name: str, *, env: dict[str, str] | None = None, path: str | None = None) -> str:
    """The path of program `name`: its variable in `env` (default: the process's), which
    must name an executable file, else the first of its names on `path` (default: PATH).
    `ProgramMissing`, naming what to install, when neither finds it."""
    program = PROGRAMS[name]
    env = os.environ if env is None else env
    chosen = env.get(program.env)
    if chosen:
        if os.path.isfile(chosen) and os.access(chosen, os.X_OK):
            return chosen
        raise ProgramMissing(f"{program.env}={chosen} is not an executable file")
    for candidate in program.names:
        found = shutil.which(candidate, path=path if path is not None else env.get("PATH"))
        if found:
            return found
    raise ProgramMissing(
        f"{name} is needed by this test and is not on the PATH (nor set in {program.env});"
        f" install it: {program.install}"
    )


def program(name: str) -> str:
    """`find_program(name)` in a test: a missing program fails it in one line."""
    try:
        return find_program(name)
    except ProgramMissing as exc:
        pytest.fail(str(exc), pytrace=False)
