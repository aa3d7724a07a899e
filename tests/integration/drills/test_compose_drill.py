"""`etl drill compose` (and `ci`, `all`, which end with it) on a machine without Docker:
one line saying what to install, at once, before any other drill has run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_without_docker_the_compose_drill_fails_at_once_saying_what_to_install(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no `docker` on it
    for name in ("compose", "ci"):
        done = subprocess.run(
            [sys.executable, "-m", "service", "drill", name],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 1, (done.stdout[-2000:], done.stderr[-2000:])
        (line,) = done.stdout.splitlines()
        assert line.startswith(f"etl drill {name}: the compose drill needs Docker: no `docker`")
        assert "apt-get install docker.io docker-compose-plugin" in line
        assert "Docker Desktop" in line and "Traceback" not in done.stderr
