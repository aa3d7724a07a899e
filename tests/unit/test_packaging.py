"""The wheel ships everything the code loads at run time: every `.sql` file of the tree (named
queries, migrations), the console's templates and static files. Built from a copy of the
tree with the project's own build backend, offline, without setuptools warnings."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(".venv", ".git", "var", "build", "*.egg-info", "__pycache__")
PACKAGES = ("service", "actors", "connectors", "dag", "ddl")


def test_the_wheel_ships_every_sql_file_template_and_static_file(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=SKIP)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "--wheel-dir", str(tmp_path / "dist"), str(src)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    # no setuptools warning blocks on every install (a data folder left out of `packages`)
    assert "would be ignored" not in built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("etl_platform-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = {
        p.relative_to(src).as_posix()
        for package in PACKAGES
        for pattern in ("*.sql", "*.html", "*.css", "*.js")
        for p in (src / package).rglob(pattern)
    }
    assert any(w.endswith(".sql") for w in wanted) and any(w.endswith(".html") for w in wanted)
    assert wanted - shipped == set(), "not in the wheel"
