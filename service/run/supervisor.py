"""`etl up`: the coordinator and two executors in the foreground, like compose with
`restart: unless-stopped`. Output lines are prefixed with the child's name; a child that
dies is restarted (and the restart logged), except one exiting with `EXIT_NOT_READY` (it
said why: a restart cannot help), which stops everything with exit 2, as SIGINT/SIGTERM
stop everything with 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from service.run.preflight import EXIT_NOT_READY

EXECUTORS = ("executor-1", "executor-2")
STOP_TIMEOUT_S = 30.0


def child_commands(executors: tuple[str, ...] = EXECUTORS) -> dict[str, list[str]]:
    """The processes of the local topology (the same as docker-compose.yml's services)."""
    etl = [sys.executable, "-m", "service"]
    commands = {"coordinator": [*etl, "coordinator"]}
    for name in executors:
        commands[name] = [*etl, "executor", "--name", name]
    return commands


@dataclass
class Child:
    name: str
    command: list[str]
    proc: subprocess.Popen | None = None
    restarts: int = 0
    started_at: float = 0.0
    pumps: list[threading.Thread] = field(default_factory=list)


class Supervisor:
    """Starts, watches, restarts and stops the children."""

    def __init__(self, commands: dict[str, list[str]], *, out=None, restart_delay_s: float = 1.0):
        self.children = {name: Child(name, cmd) for name, cmd in commands.items()}
        self.out = out or sys.stdout
        self.restart_delay_s = restart_delay_s
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._width = max(len(n) for n in commands)

    def say(self, name: str, line: str) -> None:
        with self._lock:
            self.out.write(f"{name:>{self._width}} | {line.rstrip()}\n")
            self.out.flush()

    def _start(self, child: Child) -> None:
        # Each child leads its own process group (in our session): a restart can then clear
        # out anything the dead child left behind (its API server, say), and a terminal's
        # Ctrl-C reaches only us, who stop the children in order.
        child.proc = subprocess.Popen(
            child.command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            process_group=0,
        )
        child.started_at = time.monotonic()
        pump = threading.Thread(target=self._pump, args=(child, child.proc), daemon=True)
        pump.start()
        self.say("up", f"started {child.name} pid={child.proc.pid}")

    def _pump(self, child: Child, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.say(child.name, line)

    def run(self, notes: Sequence[str] = ()) -> int:
        """Print `notes`, run until told to stop; return 0 after a clean stop. The signals
        are heard before the first line is out (a reader may stop it once it read them)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop.set())
        for line in notes:
            self.say("up", line)
        for child in self.children.values():
            self._start(child)
        while not self.stop.wait(0.2):
            for child in self.children.values():
                if child.proc is not None and child.proc.poll() is not None:
                    code = child.proc.returncode
                    if code == EXIT_NOT_READY:
                        self.say("up", f"{child.name} cannot start (see above); stopping")
                        self.shutdown()
                        return 2
                    # A child that keeps dying waits longer each time, up to 10 s.
                    quick = time.monotonic() - child.started_at < 10
                    backoff = self.restart_delay_s * (2 ** min(child.restarts, 4))
                    delay = min(10.0, backoff) if quick else self.restart_delay_s
                    child.restarts += 1
                    self.say(
                        "up",
                        f"{child.name} exited with {code}; "
                        f"restart #{child.restarts} in {delay:g} s",
                    )
                    _kill_group(child.proc.pid)
                    if self.stop.wait(delay):
                        break
                    self._start(child)
        return self.shutdown()

    def shutdown(self) -> int:
        self.say("up", "stopping")
        for child in self.children.values():
            if child.proc is not None and child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for child in self.children.values():
            if child.proc is None:
                continue
            try:
                child.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say("up", f"{child.name} did not stop in time; killing it")
                child.proc.kill()
                child.proc.wait()
        self.say("up", "stopped")
        return 0


def _kill_group(pgid: int) -> None:
    """SIGKILL what is left of a dead child's process group."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_up(notes: Sequence[str] = ()) -> int:
    """`etl up`: coordinator + executor-1 + executor-2 in the foreground, after printing
    `notes` (the directories they use)."""
    return Supervisor(child_commands()).run(notes)
