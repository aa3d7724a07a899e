"""The Docker side of the compose drill: the `docker` command line (every call kept for the
report), a Compose project of the repository's own `docker-compose.yml`, and the peak memory
of its containers read from their cgroups (or from `docker stats` where the host has none of
them: Docker Desktop)."""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drills.harness import ROOT

COMPOSE_FILE = ROOT / "docker-compose.yml"
SETUP_HINT = (
    "install Docker Engine with the compose plugin (Debian/Ubuntu: apt-get install docker.io"
    " docker-compose-plugin, or docker/engine-setup; macOS/Windows: Docker Desktop) and start it"
)


# Run inside a container: SIGKILL the one child of PID 1 (`docker exec`'s own process has
# parent 0 in the container's PID namespace, so it is not among them).
_KILL_MAIN = """
import os, signal
kids = [int(p) for p in os.listdir("/proc") if p.isdigit()
        and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1] == "1"]
assert len(kids) == 1, kids
os.kill(kids[0], signal.SIGKILL)
print(kids[0])
"""


class EngineMissing(RuntimeError):
    """No Docker Engine answers, or its `docker compose` is not v2."""


@dataclass
class Docker:
    """Runs `docker ...`; every command, its duration and exit code are kept (`log`)."""

    log: list[dict[str, Any]] = field(default_factory=list)

    def __call__(
        self, *args: str, timeout: float = 600, check: bool = True, stdin: bytes | None = None,
        env: dict[str, str] | None = None,
    ) -> str:  # fmt: skip
        """Run `docker ARGS`; its stdout. `check`: a non-zero exit raises with stderr."""
        started = time.monotonic()
        try:
            done = subprocess.run(
                ["docker", *args], input=stdin, capture_output=True, timeout=timeout, env=env,
                cwd=ROOT,
            )  # fmt: skip
        except FileNotFoundError as exc:
            raise EngineMissing(f"no `docker` command on PATH ({SETUP_HINT})") from exc
        took = round(time.monotonic() - started, 2)
        self.log.append({"command": "docker " + " ".join(args), "s": took, "rc": done.returncode})
        out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
        if check and done.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)} exited {done.returncode}: {err[-3000:]}")
        return out

    def summary(self) -> list[str]:
        """Every distinct command in the order first run: how often, total seconds, exit codes."""
        seen: dict[str, list] = {}
        for c in self.log:
            entry = seen.setdefault(c["command"], [0, 0.0, set()])
            entry[0], entry[1] = entry[0] + 1, entry[1] + c["s"]
            entry[2].add(c["rc"])
        return [f"{cmd}  [{n}x, {s:.1f} s, exit {'/'.join(map(str, sorted(rc)))}]"
                for cmd, (n, s, rc) in seen.items()]  # fmt: skip

    def ensure_engine(self) -> dict[str, str]:
        """The engine's and Compose's versions; `EngineMissing` when either is absent."""
        try:
            server = self("version", "--format", "{{.Server.Version}}", timeout=30).strip()
        except EngineMissing:
            raise
        except RuntimeError as exc:
            raise EngineMissing(f"no Docker Engine answers ({SETUP_HINT}): {exc}") from exc
        try:
            compose = self("compose", "version", "--short", timeout=30).strip()
        except RuntimeError as exc:
            raise EngineMissing(f"`docker compose` (v2) is missing ({SETUP_HINT})") from exc
        if not compose.lstrip("v").startswith("2."):
            raise EngineMissing(f"`docker compose` is {compose}, not v2 ({SETUP_HINT})")
        return {"engine": server, "compose": compose}


class ComposeProject:
    """The repository's `docker-compose.yml` (plus `overrides`) as Compose project `name`,
    with `env` as its variables (ETL_ADMIN_TOKEN, ETL_API_PORT, the timings)."""

    def __init__(self, docker: Docker, name: str, env: dict[str, str], overrides: list[Path]):
        self.docker, self.name, self.env = docker, name, env
        self.files = [COMPOSE_FILE, *overrides]

    def __call__(self, *args: str, timeout: float = 600, check: bool = True) -> str:
        files = [a for f in self.files for a in ("-f", str(f))]
        return self.docker("compose", "-p", self.name, *files, *args, timeout=timeout,
                           check=check, env=self.env)  # fmt: skip

    def container(self, service: str) -> str:
        """The id of `service`'s container (running or not)."""
        ids = self("ps", "-a", "-q", service).split()
        if len(ids) != 1:
            raise RuntimeError(f"expected one container of {service}, found {ids}")
        return ids[0]

    def replicas(self, service: str) -> dict[str, str]:
        """`service-N` (N: the replica's number, as in its container name) -> container id,
        for every container of `service`, running or not, in the order of N."""
        ids = self("ps", "-a", "-q", service).split()
        rows = self.docker("inspect", "-f", "{{.Id}} {{.Name}}", *ids).split() if ids else []
        pairs = zip(rows[::2], rows[1::2], strict=True)
        numbered = {int(name.rsplit("-", 1)[1]): cid for cid, name in pairs}
        return {f"{service}-{n}": numbered[n] for n in sorted(numbered)}

    def inspect(self, service: str, template: str) -> str:
        return self.docker("inspect", "-f", template, self.container(service)).strip()

    def kill_main_process(self, container: str) -> int:
        """SIGKILL, from inside `container` (`docker exec`), of its main process: the one
        child of docker-init (tini, PID 1); its PID in the container."""
        out = self.docker("exec", container, "python", "-c", _KILL_MAIN)
        return int(out.strip())

    def sql(self, query: str) -> list[list[str]]:
        """`query` through psql inside the postgres container, on database etl; its rows."""
        out = self("exec", "-T", "postgres", "psql", "-U", "postgres", "-d", "etl", "-v",
                   "ON_ERROR_STOP=1", "-At", "-F", "|", "-c", query, timeout=60)  # fmt: skip
        return [line.split("|") for line in out.splitlines() if line]

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes that still carry the project's label."""
        label = f"label=com.docker.compose.project={self.name}"
        kinds = {"containers": ("ps", "-a", "-q"), "networks": ("network", "ls", "-q"),
                 "volumes": ("volume", "ls", "-q")}  # fmt: skip
        return {k: self.docker(*cmd, "--filter", label).split() for k, cmd in kinds.items()}


def _cgroup_bytes(container_id: str) -> tuple[int, int] | None:
    """(resident anonymous memory, peak usage including page cache) of a container's cgroup
    (v1, then v2 under the cgroupfs and systemd drivers), or None when it has none now."""
    v1 = Path("/sys/fs/cgroup/memory/docker") / container_id
    v2 = [Path("/sys/fs/cgroup/docker") / container_id,
          Path(f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope")]  # fmt: skip
    try:
        if v1.exists():
            stat = dict(line.split() for line in (v1 / "memory.stat").read_text().splitlines())
            return int(stat["total_rss"]), int((v1 / "memory.max_usage_in_bytes").read_text())
        for d in v2:
            if d.exists():
                stat = dict(line.split() for line in (d / "memory.stat").read_text().splitlines())
                peak = d / "memory.peak"
                usage = peak if peak.exists() else d / "memory.current"
                return int(stat["anon"]), int(usage.read_text())
    except (OSError, KeyError, ValueError):
        return None
    return None


_UNITS = {"B": 1, "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3,
          "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}  # fmt: skip


def parse_mem_usage(text: str) -> int:
    """Bytes in use of `docker stats`' MemUsage column (`123.4MiB / 512MiB`)."""
    used = text.split("/")[0].strip()
    number = used.rstrip("BKMGikb")
    return round(float(number) * _UNITS[used[len(number) :]])


def _stats_bytes(docker: Docker, ids: list[str]) -> dict[str, tuple[int, int]]:
    """(usage, usage) of each container by the engine's own accounting (`docker stats`):
    where the host has no cgroup of the containers to read (Docker Desktop runs them in a
    VM), the peak is what the samples saw."""
    out = docker("stats", "--no-stream", "--format", "{{.Container}} {{.MemUsage}}", *ids,
                 timeout=30, check=False)  # fmt: skip
    found = {}
    for line in out.splitlines():
        cid, _, usage = line.partition(" ")
        try:
            found[cid] = (parse_mem_usage(usage),) * 2
        except (ValueError, KeyError):
            continue
    return found


class ContainerMemory:
    """Every `interval_s`, from a background thread: the cgroup memory of each service's
    container (of each replica of a scaled one); the peak per container over the drill (a
    restarted container's cgroup starts from zero, the peak does not)."""

    def __init__(self, project: ComposeProject, services: list[str], interval_s: float = 0.25):
        self.project, self.services, self.interval_s = project, services, interval_s
        self.peaks: dict[str, list[int]] = {s: [0, 0] for s in services}
        self.limits: dict[str, int] = {}
        self._ids: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cgroup-sampler", daemon=True)

    def start(self) -> None:
        """Find the containers: one per service, or `service-N` for each of its replicas."""
        for service in self.services:
            replicas = self.project.replicas(service)
            named = replicas if len(replicas) > 1 else {service: next(iter(replicas.values()))}
            for label, cid in named.items():
                self._ids[label] = cid
                self.peaks.setdefault(label, [0, 0])
                limit = self.project.docker("inspect", "-f", "{{.HostConfig.Memory}}", cid)
                self.limits[label] = int(limit.strip() or 0)
        for service in set(self.services) - set(self._ids):
            del self.peaks[service]
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # never started when `up` failed before it
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            got = {s: _cgroup_bytes(cid) for s, cid in self._ids.items()}
            missing = [s for s, bytes_ in got.items() if bytes_ is None]
            if missing:  # no host cgroup (Docker Desktop): ask the engine
                stats = _stats_bytes(self.project.docker, [self._ids[s] for s in missing])
                got.update({s: stats.get(self._ids[s]) for s in missing})
            for service, bytes_ in got.items():
                if bytes_ is not None:
                    peak = self.peaks[service]
                    peak[:] = [max(a, b) for a, b in zip(peak, bytes_, strict=True)]

    def table(self) -> list[dict[str, Any]]:
        mib = lambda b: round(b / 2**20, 1)  # noqa: E731
        return [
            {"container": s, "limit_mib": mib(self.limits.get(s, 0)) or None,
             "peak_rss_mib": mib(rss), "peak_usage_mib": mib(usage)}
            for s, (rss, usage) in self.peaks.items()
        ]  # fmt: skip
