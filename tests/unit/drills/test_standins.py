"""The stand-in base images' apt mirror comes from the machine's own apt sources, in both of
apt's formats, and never from a name written in the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.standins import STANDINS, apt_mirror

DEB822 = """\
Types: deb
URIs: http://mirror.invalid/debian-security
Suites: bookworm-security
Components: main

Types: deb
# a comment line
URIs: http://mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_deb822_sources_give_the_uri_of_the_stanza_with_the_codename(tmp_path: Path):
    path = tmp_path / "debian.sources"
    path.write_text(DEB822)
    assert apt_mirror([path], "bookworm") == "http://mirror.invalid/debian"


def test_one_line_sources_skip_other_suites_and_options(tmp_path: Path):
    path = tmp_path / "sources.list"
    path.write_text(
        "# deb http://commented.invalid/debian bookworm main\n"
        "deb http://mirror.invalid/debian-security bookworm-security main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://mirror.invalid/debian bookworm main\n"
    )
    assert apt_mirror([path], "bookworm") == "http://mirror.invalid/debian"


def test_no_source_for_the_codename_is_an_error_naming_the_files(tmp_path: Path):
    path = tmp_path / "other.list"
    path.write_text("deb http://mirror.invalid/debian trixie main\n")
    ignored = tmp_path / "notes.txt"
    ignored.write_text("deb http://mirror.invalid/debian bookworm main\n")
    with pytest.raises(RuntimeError, match=r"no apt source for bookworm in .*other\.list"):
        apt_mirror([path, ignored], "bookworm")


def test_the_stand_in_files_name_no_host():
    for path in STANDINS.iterdir():
        text = path.read_text()
        assert "http://" not in text and "https://" not in text, path
