"""tests/programs.py: the programs the tests drive are found on whatever PATH holds them,
under any of their names, or where their variable says; a missing one is one line naming
what to install."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.programs import PROGRAMS, ProgramMissing, find_program


def executable(path: Path, text: str = "#!/bin/sh\necho found $0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_programs_are_found_on_a_path_in_a_different_place(tmp_path: Path) -> None:
    elsewhere = tmp_path / "opt" / "tools" / "bin"
    for name in ("promtool", "prometheus"):
        made = executable(elsewhere / name)
        found = find_program(name, env={"PATH": f"{tmp_path / 'empty'}{os.pathsep}{elsewhere}"})
        assert found == str(made)
        ran = subprocess.run([found], capture_output=True, text=True, check=True)
        assert ran.stdout.strip() == f"found {made}"
    chrome = executable(tmp_path / "apps" / "google-chrome")  # another name of chromium
    assert find_program("chromium", env={"PATH": str(chrome.parent)}) == str(chrome)


def test_the_variable_wins_and_must_name_an_executable(tmp_path: Path) -> None:
    mine = executable(tmp_path / "my-chromium")
    on_path = executable(tmp_path / "bin" / "chromium")
    env = {"PATH": str(on_path.parent), "ETL_TEST_CHROMIUM": str(mine)}
    assert find_program("chromium", env=env) == str(mine)
    (tmp_path / "plain").write_text("")
    with pytest.raises(ProgramMissing, match=r"^ETL_TEST_CHROMIUM=.*plain is not an executable"):
        find_program("chromium", env={**env, "ETL_TEST_CHROMIUM": str(tmp_path / "plain")})


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_missing_program_says_what_to_install_per_platform(name: str, tmp_path: Path) -> None:
    with pytest.raises(ProgramMissing) as missing:
        find_program(name, env={"PATH": str(tmp_path)})
    message = str(missing.value)
    assert "\n" not in message and PROGRAMS[name].env in message
    assert "Debian/Ubuntu: apt-get install" in message and "macOS" in message
