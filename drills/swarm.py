"""`etl drill swarm`: the repository's `docker-stack.yml` on a single-node Docker Swarm (see
docs/swarm.md). The image is built locally (no registry); the stack is deployed; during a
100,000-record import the executors are scaled 2 -> 4, rolled out to a new image (`docker
service update --image`, one task at a time) and scaled back to 2; the run must end with
exactly 100,000 rows and JSONL lines. The stack, its volumes and the rollout image are
removed, and the swarm is left again if the drill created it."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Callable

from dag import BATCH_SIZE, RUN_FINAL, RunStatus
from drills.checks import step_of
from drills.engine import Docker
from drills.harness import FAST_TIMINGS, ROOT, ApiClient, free_port, wait_until
from drills.report import DrillResult
from drills.standins import ensure_base_images
from drills.stopwatch import Stopwatch
from drills.workload import generate_csv, import_plan

STACK_FILE = ROOT / "docker-stack.yml"
IMAGE, ROLLOUT = "etl-platform:latest", "etl-platform:drill-rollout"
IMPORT_FILE = "customers-100k.csv"
# to_table outlasts the scaling and the rollout (200 batches x 400 ms, and more on 2 cores)
SLOW_EXPORT = "slow_batches:step=to_table:ms=400"
# A rollout waits for each new task's first healthy check: every 2 s instead of 10 s.
FAST_HEALTH = {"interval": "2s", "start_period": "2s"}
_COUNT_JSONL = (
    "import json, sys; lines = open(f'/exports/{sys.argv[1]}/customers.jsonl').read()"
    ".splitlines(); print(len(lines), len({json.loads(x)['id'] for x in lines}))"
)


class SwarmDrill:
    """One drill: its stack (`etl-swarm-<pid>`), data directory, API client and result."""

    def __init__(self, res: DrillResult, records: int):
        self.res, self.n = res, records
        self.docker = Docker()
        self.name = f"etl-swarm-{os.getpid()}"
        self.dir = ROOT / "var" / "drills" / "swarm"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.data = self.dir / "data"
        port, token = free_port(), secrets.token_urlsafe(24)
        self.env = {
            **os.environ,
            **FAST_TIMINGS,
            "ETL_ADMIN_TOKEN": token,
            "ETL_API_PORT": str(port),
        }
        res.env.update({**FAST_TIMINGS, "ETL_API_PORT": str(port), "ETL_FAULT": SLOW_EXPORT})
        self.api = ApiClient(f"http://127.0.0.1:{port}", token)
        self.created_swarm = False
        self.timings = Stopwatch()

    def timed(self, label: str, action: Callable[[], object]) -> object:
        return self.timings.timed(label, action)

    def prepare(self) -> None:
        """The data directory and an override file that mounts it and slows the export."""
        shutil.copytree(ROOT / "fixtures", self.data)
        self.res.figures["input"] = generate_csv(self.data / IMPORT_FILE, self.n)
        for path in [self.data, *self.data.rglob("*")]:  # the containers run as uid 10001
            path.chmod(0o755 if path.is_dir() else 0o644)
        mount = {"type": "bind", "source": str(self.data), "target": "/data", "read_only": True}
        override = {
            "version": "3.8",
            "services": {
                "coordinator": {"volumes": [mount]},
                "executor": {
                    "volumes": [mount],
                    "environment": {"ETL_FAULT": SLOW_EXPORT},
                    "healthcheck": FAST_HEALTH,
                },
            },
        }
        (self.dir / "stack.drill.yml").write_text(json.dumps(override, indent=2))

    def up(self) -> None:
        self.res.figures["engine"] = self.docker.ensure_engine()
        self.timed("base images", lambda: ensure_base_images(self.docker))
        self.timed("build", lambda: self.docker("build", "-q", "-t", IMAGE, "."))
        self.timed(
            "build rollout",
            lambda: self.docker(
                "build", "-q", "-t", ROLLOUT, "--label", "org.etl-platform.rollout=1", "."
            ),
        )
        state = self.docker("info", "--format", "{{.Swarm.LocalNodeState}}").strip()
        if state != "active":
            self.docker("swarm", "init", "--advertise-addr", "127.0.0.1")
            self.created_swarm = True
        self.res.figures["swarm"] = "created for the drill" if self.created_swarm else "existing"
        files = ["-c", str(STACK_FILE), "-c", str(self.dir / "stack.drill.yml")]
        self.timed(
            "stack deploy", lambda: self.docker("stack", "deploy", *files, self.name, env=self.env)
        )
        self.timed("healthy", lambda: self.api.wait_healthy(timeout=300))
        self.wait_replicas(2)

    def service(self, name: str) -> str:
        return f"{self.name}_{name}"

    def running_tasks(self, service: str) -> list[str]:
        """The images of the service's tasks that run now."""
        out = self.docker(
            "service",
            "ps",
            self.service(service),
            "--filter",
            "desired-state=running",
            "--format",
            "{{.Image}} {{.CurrentState}}",
        )
        return [line.split()[0] for line in out.splitlines() if " Running " in f" {line} "]

    def wait_replicas(self, n: int, image: str | None = None) -> None:
        def converged() -> bool:
            images = self.running_tasks("executor")
            return len(images) == n and all(image is None or i.startswith(image) for i in images)

        wait_until(converged, timeout=300, what=f"{n} executor tasks running", every=0.5)

    def container(self, service: str) -> str:
        ids = self.docker(
            "ps", "-q", "--filter", f"label=com.docker.swarm.service.name={self.service(service)}"
        ).split()
        if len(ids) != 1:
            raise RuntimeError(f"expected one running container of {service}, found {ids}")
        return ids[0]

    def down(self) -> None:
        """`stack rm`, the stack's volumes and the rollout image removed, the swarm left if
        the drill created it; nothing with the stack's label may remain."""
        self.docker("stack", "rm", self.name, check=False)
        label = f"label=com.docker.stack.namespace={self.name}"
        wait_until(
            lambda: not self.docker("ps", "-aq", "--filter", label).split(),
            timeout=120,
            what="the stack's containers gone",
            every=1,
        )
        for _ in range(30):  # a removed container may hold its volume a moment longer
            volumes = self.docker("volume", "ls", "-q", "--filter", label).split()
            if not volumes or self.docker("volume", "rm", *volumes, check=False).split():
                break
            time.sleep(1)
        self.docker("image", "rm", ROLLOUT, check=False)
        if self.created_swarm:
            self.docker("swarm", "leave", "--force", check=False)
        left = {
            "containers": self.docker("ps", "-aq", "--filter", label).split(),
            "volumes": self.docker("volume", "ls", "-q", "--filter", label).split(),
        }
        self.res.expect(
            "containers and volumes left after stack rm", left, {"containers": [], "volumes": []}
        )

    # --- the scenario ---
    def run(self, run_id: str) -> dict | None:
        try:
            return self.api.run(run_id)
        except (OSError, RuntimeError):
            return None

    def batches(self, run_id: str) -> tuple[int, str]:
        run = self.run(run_id)
        if run is None:
            return 0, "unknown"
        step = step_of(run, "to_table")
        return (step or {}).get("records_in", 0) // BATCH_SIZE, run["status"]

    def at(self, run_id: str, fraction: float, label: str, action: Callable[[], object]) -> None:
        """Once to_table has committed `fraction` of its batches: `action`; the report says
        whether the run was still running when it was done."""
        total = -(-self.n // BATCH_SIZE)
        wait_until(
            lambda: (
                self.batches(run_id)[0] >= fraction * total or self.batches(run_id)[1] in RUN_FINAL
            ),
            timeout=600,
            what=f"{label}: {fraction:.0%} of to_table",
            every=0.2,
        )
        done, status = self.batches(run_id)
        self.timed(label, action)
        self.res.check(
            f"{label} while the import ran",
            status == RunStatus.RUNNING,
            f"at {done} of {total} batches, run {status}",
        )

    def import_through_changes(self) -> None:
        pipeline = self.api.create("swarm-import", import_plan(path=IMPORT_FILE))
        code, body = self.api.trigger(pipeline, "swarm-import")
        if code != 201:
            raise RuntimeError(f"trigger: {code} {body}")
        run_id, executor = body["id"], self.service("executor")
        self.at(
            run_id,
            0.1,
            "scale 2 -> 4",
            lambda: (self.docker("service", "scale", "-d", f"{executor}=4"), self.wait_replicas(4)),
        )
        self.at(
            run_id,
            0.3,
            "rollout of a new image",
            lambda: (
                self.docker("service", "update", "-d", "--image", ROLLOUT, executor),
                self.wait_replicas(4, ROLLOUT),
            ),
        )
        self.at(
            run_id,
            0.5,
            "scale 4 -> 2",
            lambda: (self.docker("service", "scale", "-d", f"{executor}=2"), self.wait_replicas(2)),
        )
        run = wait_until(
            lambda: (r := self.run(run_id)) and r["status"] in RUN_FINAL and r,
            timeout=900,
            what="the import to end",
            every=0.5,
        )
        self.res.add_run("import across scaling and a rollout", run)
        self.res.expect("the import", run["status"], RunStatus.SUCCEEDED)
        self.check_rows(run)
        names = {(a["executor"] or "").split(":")[0] for s in run["steps"] for a in s["attempts"]}
        self.res.figures["executors that ran attempts"] = sorted(names)
        step = step_of(run, "to_table")
        outcomes = [a["outcome"] for a in step["attempts"]]
        self.res.check("to_table handed over by a replaced or removed task", "released" in outcomes,
                       f"attempt outcomes {outcomes}")  # fmt: skip
        self.res.figures["to_table attempts"] = [
            (a["executor"], a["outcome"]) for a in step["attempts"]
        ]

    def check_rows(self, run: dict) -> None:
        n = self.n
        query = (
            "SELECT count(*), count(DISTINCT record_key), count(DISTINCT id), min(id),"
            f" max(id) FROM sandbox.customers WHERE run_id = '{run['id']}'"
        )
        out = self.docker(
            "exec",
            self.container("postgres"),
            "psql",
            "-U",
            "postgres",
            "-d",
            "etl",
            "-At",
            "-F",
            "|",
            "-c",
            query,
        )
        rows = tuple(int(v) for v in out.strip().split("|"))
        self.res.expect(
            "sandbox rows, distinct keys, distinct ids, min, max", rows, (n, n, n, 1, n)
        )
        out = self.docker(
            "exec", self.container("coordinator"), "python", "-c", _COUNT_JSONL, run["id"]
        )
        self.res.expect("JSONL lines, distinct ids", tuple(map(int, out.split())), (n, n))


def drill_swarm(res: DrillResult, records: int, fast: bool) -> None:
    """The whole drill (always with the fast timings); the stack is removed whatever
    happened."""
    drill = SwarmDrill(res, records)
    drill.prepare()
    try:
        drill.up()
        drill.timed("import", drill.import_through_changes)
    finally:
        try:
            drill.down()
        finally:
            res.figures["durations_s"] = drill.timings
            res.figures["commands"] = drill.docker.summary()
