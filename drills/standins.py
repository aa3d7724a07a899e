"""The base images of the project's Dockerfile and compose file (`python:3.11-slim`,
`postgres:15`) on a machine that reaches no container registry: used when present, pulled
when a registry answers, else built here as local stand-ins from Debian's packages
(`docker/standins/`): a debootstrapped Debian imported as `etl-standin-base:<codename>`, with
the apt mirror read from the machine's own apt sources. Built once per machine, then reused."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from drills.engine import Docker
from drills.harness import ROOT

STANDINS = ROOT / "docker" / "standins"
IMAGES = {"python:3.11-slim": "python.Dockerfile", "postgres:15": "postgres.Dockerfile"}
CODENAME = "bookworm"  # Debian 12: python3 is 3.11, postgresql is 15
BASE = f"etl-standin-base:{CODENAME}"
STANDIN_LABEL = '{{index .Config.Labels "org.etl-platform.standin"}}'
APT_SOURCES = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]


def apt_mirror(sources: list[Path] = APT_SOURCES, codename: str = CODENAME) -> str:
    """The URI of the first apt source of this machine that serves `codename` itself (not
    its -security or -updates suites), in one-line or deb822 form."""
    for path in sources:
        if not path.is_file() or path.suffix not in (".list", ".sources"):
            continue
        text = path.read_text(errors="replace")
        for m in re.finditer(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", text, re.M):
            if m.group(2) == codename:
                return m.group(1)
        for stanza in re.split(r"\n\s*\n", text):
            fields = dict(re.findall(r"^(\w[\w-]*):\s*(.+)$", stanza, re.M))
            if codename in fields.get("Suites", "").split() and fields.get("URIs"):
                return fields["URIs"].split()[0]
    raise RuntimeError(f"no apt source for {codename} in {', '.join(map(str, sources))}")


def host_ca_bundle() -> Path:
    """The CA bundle pip trusts here (PIP_CERT, else Debian's system bundle)."""
    path = Path(os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt")
    if not path.is_file():
        raise RuntimeError(f"no CA bundle at {path} for the stand-in python image")
    return path


def _present(docker: Docker, image: str) -> bool:
    return bool(docker("image", "ls", "-q", image).strip())


def build_base(docker: Docker) -> None:
    """debootstrap a minimal Debian and import it as `BASE` (needs root and debootstrap)."""
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is missing (apt-get install debootstrap)")
    with tempfile.TemporaryDirectory(prefix="etl-standin-") as tmp:
        root = Path(tmp) / "root"
        subprocess.run(
            ["debootstrap", "--variant=minbase", CODENAME, str(root), apt_mirror()],
            check=True, capture_output=True, timeout=900,
        )  # fmt: skip
        tar = subprocess.run(["tar", "-C", str(root), "-c", "."], check=True,
                             capture_output=True).stdout  # fmt: skip
        docker("import", "-", BASE, stdin=tar)


def build_standin(docker: Docker, image: str) -> None:
    """Build the stand-in of `image` from `docker/standins/` on `BASE`."""
    with tempfile.TemporaryDirectory(prefix="etl-standin-ctx-") as tmp:
        for f in STANDINS.iterdir():
            shutil.copy(f, tmp)
        shutil.copy(host_ca_bundle(), Path(tmp) / "ca.crt")
        docker("build", "-q", "-t", image, "-f", str(Path(tmp) / IMAGES[image]), tmp)


def ensure_base_images(docker: Docker) -> dict[str, str]:
    """Each base image present, pulled or built as a stand-in; how, and in what time."""
    how = {}
    for image in IMAGES:
        started = time.monotonic()
        if _present(docker, image):
            label = docker("image", "inspect", "-f", STANDIN_LABEL, image)
            how[image] = "present (a local stand-in)" if label.strip() else "present"
            continue
        if docker("pull", "-q", image, check=False, timeout=120) and _present(docker, image):
            how[image] = f"pulled in {time.monotonic() - started:.1f} s"
            continue
        if not _present(docker, BASE):
            build_base(docker)
        build_standin(docker, image)
        how[image] = f"built as a local stand-in in {time.monotonic() - started:.1f} s"
    return how
