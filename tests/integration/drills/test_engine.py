"""The compose drill's Docker side on the real engine: a container's main process is killed
from inside the container (its pid namespace), so no host pid is ever signalled - under
Docker Desktop a pid read from `docker top` is one of the VM, or of the user's Mac."""

from __future__ import annotations

import time

from drills.engine import Docker
from drills.standins import ensure_base_images

IMAGE = "python:3.11-slim"  # the base of the project's image: present, pulled or a stand-in


def test_the_main_process_is_killed_inside_its_container() -> None:
    docker = Docker()
    ensure_base_images(docker)  # on a new machine, before any drill has built it
    sleeper = "import time; time.sleep(300)"
    cid = docker("run", "-d", "--init", IMAGE, "python", "-c", sleeper, timeout=120).strip()
    try:
        host_init = int(docker("inspect", "-f", "{{.State.Pid}}", cid).strip())
        killed = docker.kill_main_process(cid)
        deadline = time.monotonic() + 30
        state = ""
        while time.monotonic() < deadline:
            state = docker("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", cid).strip()
            if state.startswith("exited"):
                break
            time.sleep(0.2)
        assert state == "exited 137"  # docker-init passes on its child's SIGKILL (128 + 9)
        assert killed != host_init and killed < 100  # the pid inside the container
        commands = [c["command"] for c in docker.log]
        assert any(c.startswith(f"docker exec {cid} ") for c in commands)
        assert not any(c.startswith("docker top") for c in commands)
    finally:
        docker("rm", "-f", cid, check=False)
