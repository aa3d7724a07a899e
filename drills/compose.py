"""`etl drill compose`: the repository's own Dockerfile and docker-compose.yml on a real
Docker Engine with Compose v2 (see docs/compose.md). Up with four executor replicas
(`--scale executor=4`) and every container healthy, each replica under its own name, the
sample plan, a 100,000-record import with the replica that holds the running step `docker
kill`ed, a replica's main process killed inside its container (the restart policy brings it
back under the same name), the coordinator and PostgreSQL restarted mid-run, the peak memory of
every container from its cgroup, and `down -v` leaving nothing behind."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from dag import BATCH_SIZE, RUN_FINAL, RunStatus
from drills.checks import LEASE_EXPIRED, SUCCEEDED, outcomes, step_of
from drills.engine import ComposeProject, ContainerMemory, Docker
from drills.harness import FAST_TIMINGS, ROOT, ApiClient, free_port, now_utc, wait_until
from drills.report import DrillResult, iso, seconds
from drills.standins import ensure_base_images
from drills.stopwatch import Stopwatch
from drills.workload import generate_csv, import_plan

SERVICES = ["postgres", "coordinator", "executor"]
REPLICAS = 4  # `--scale executor=4`: the compose file's two, doubled
EXECUTORS = tuple(f"executor-{n}" for n in range(1, REPLICAS + 1))
PRODUCTION_TIMINGS = {"ETL_LEASE_TTL_S": "30", "ETL_HEARTBEAT_S": "10", "ETL_SWEEP_S": "2"}
IMPORT_FILE = "customers-100k.csv"
# Inside the coordinator's container: lines and distinct ids of a run's JSONL export.
_COUNT_JSONL = (
    "import json, sys; lines = open(f'/exports/{sys.argv[1]}/customers.jsonl').read()"
    ".splitlines(); print(len(lines), len({json.loads(x)['id'] for x in lines}))"
)


def _label(service: str, container_name: str) -> str:
    """A container's label in the report: its service, or `executor-N` for replica N."""
    return f"{service}-{container_name.rsplit('-', 1)[1]}" if service == "executor" else service


class ComposeDrill:
    """One drill: its Compose project (`etl-drill-<pid>`), data directory, API client,
    container memory sampler and the result it fills."""

    def __init__(self, res: DrillResult, records: int, fast: bool):
        self.res, self.n = res, records
        self.docker = Docker()
        self.dir = ROOT / "var" / "drills" / "compose"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.data = self.dir / "data"
        self.port = free_port()
        token = secrets.token_urlsafe(24)
        timings = FAST_TIMINGS if fast else PRODUCTION_TIMINGS
        variables = {"ETL_ADMIN_TOKEN": token, "ETL_API_PORT": str(self.port), **timings}
        res.env.update({**variables, "ETL_ADMIN_TOKEN": "<generated for the drill>"})
        override = self.dir / "compose.drill.yml"
        self.project = ComposeProject(
            self.docker, f"etl-drill-{os.getpid()}", {**os.environ, **variables}, [override]
        )
        self.api = ApiClient(f"http://127.0.0.1:{self.port}", token)
        self.memory = ContainerMemory(self.project, SERVICES)
        self.timings = Stopwatch()

    # --- set-up and tear-down ---
    def prepare(self) -> None:
        """The data directory (the fixtures and the seeded import file), mounted at /data
        by an override file in place of ./fixtures."""
        shutil.copytree(ROOT / "fixtures", self.data)
        self.res.figures["input"] = generate_csv(self.data / IMPORT_FILE, self.n)
        for path in [self.data, *self.data.rglob("*")]:  # the containers run as uid 10001
            path.chmod(0o755 if path.is_dir() else 0o644)
        mount = {"volumes": [f"{self.data}:/data:ro"]}
        services = {s: mount for s in ("coordinator", "executor")}
        (self.dir / "compose.drill.yml").write_text(json.dumps({"services": services}, indent=2))

    def timed(self, label: str, action: Callable[[], Any]) -> Any:
        return self.timings.timed(label, action)

    def up(self) -> None:
        self.res.figures["engine"] = self.docker.ensure_engine()
        self.res.figures["base_images"] = self.timed(
            "base images", lambda: ensure_base_images(self.docker)
        )
        self.timed("up --build --wait", lambda: self.project(
            "up", "--build", "--wait", "--wait-timeout", "300", "--scale",
            f"executor={REPLICAS}"))  # fmt: skip
        states = [json.loads(line) for line in self.project("ps", "--format", "json").splitlines()]
        got = {_label(s["Service"], s["Name"]): (s["State"], s.get("Health") or "no healthcheck")
               for s in states}  # fmt: skip
        want = {s: ("running", "healthy") for s in ["postgres", "coordinator", *EXECUTORS]}
        self.res.expect("services after up --wait (state, health)", got, want)
        code, body = self.api.call("GET", "/health", auth=False)
        self.res.expect("/health through the published port", (code, body and body["status"]),
                        (200, "ok"))  # fmt: skip
        encoding = self.project.sql("SELECT pg_encoding_to_char(encoding) FROM"
                                    " pg_database WHERE datname = 'etl'")  # fmt: skip
        self.res.expect("database etl: encoding", encoding[0][0], "UTF8")
        self.executor_names()
        self.image_sizes()
        self.memory.start()

    def executor_names(self) -> None:
        """Each replica's executor name (`executor-` + its container's hostname): distinct,
        announced in the database and labelled so in the metrics."""
        self.replicas = self.project.replicas("executor")
        hostname = lambda cid: self.docker("inspect", "-f", "{{.Config.Hostname}}", cid)  # noqa: E731
        self.names = {r: f"executor-{hostname(cid).strip()}" for r, cid in self.replicas.items()}
        self.res.figures["executor names"] = self.names
        self.res.expect("executor replicas with distinct names", len(set(self.names.values())),
                        REPLICAS)  # fmt: skip
        query = "SELECT name FROM executors WHERE stopped_at IS NULL ORDER BY name"
        announced = wait_until(
            lambda: (rows := self.project.sql(query)) and len(rows) >= REPLICAS and rows,
            timeout=60, what="every replica announced", every=0.5,
        )  # fmt: skip
        self.res.expect("executors announced", [r[0] for r in announced],
                        sorted(self.names.values()))  # fmt: skip
        labelled = set(re.findall(r'etl_executor_heartbeat_age_seconds\{executor="([^"]+)"\}',
                                  self.metrics_text()))  # fmt: skip
        self.res.expect("executors in /metrics", sorted(labelled), sorted(self.names.values()))

    def metrics_text(self) -> str:
        request = urllib.request.Request(
            self.api.url("/metrics"), headers={"Authorization": f"Bearer {self.api.token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.read().decode()

    def image_sizes(self) -> None:
        size = lambda image: int(self.docker("image", "inspect", "-f", "{{.Size}}", image))  # noqa: E731
        image, base = size("etl-platform:latest"), size("python:3.11-slim")
        mib = lambda b: round(b / 2**20, 1)  # noqa: E731
        self.res.figures["image"] = {
            "etl-platform:latest MiB": mib(image),
            "of which above python:3.11-slim MiB": mib(image - base),
        }
        listing = self.docker("run", "--rm", "--entrypoint", "ls", "etl-platform:latest", "/app")
        self.res.expect("the image's /app", sorted(listing.split()), sorted(
            ["actors", "connectors", "dag", "ddl", "fixtures", "pyproject.toml", "README.md",
             "service", "setup.cfg"]))  # fmt: skip
        user = self.docker("image", "inspect", "-f", "{{.Config.User}}", "etl-platform:latest")
        self.res.expect("the image's user", user.strip(), "etl")

    def down(self) -> None:
        self.memory.stop()
        self.res.memory = self.memory.table()
        logs = self.dir / "compose.log"  # every container's output, kept past `down -v`
        logs.write_text(self.project("logs", "--no-color", "--timestamps", check=False))
        self.res.notes.append(f"container logs: {logs}")
        self.timed("down -v", lambda: self.project("down", "-v", "--remove-orphans",
                                                   "--timeout", "20"))  # fmt: skip
        left = self.project.leftovers()
        self.res.expect("containers, networks, volumes left after down -v", left,
                        {"containers": [], "networks": [], "volumes": []})  # fmt: skip

    # --- the API ---
    def run(self, run_id: str) -> dict | None:
        try:
            return self.api.run(run_id)
        except (OSError, RuntimeError):  # the API restarting or its database away
            return None

    def wait_run(self, run_id: str, timeout: float = 600) -> dict:
        def final() -> dict | None:
            run = self.run(run_id)
            return run if run and run["status"] in RUN_FINAL else None

        return wait_until(final, timeout=timeout, what=f"run {run_id} to end", every=0.25)

    def trigger(self, pipeline_id: str, key: str) -> str:
        code, body = self.api.trigger(pipeline_id, key)
        if code != 201:
            raise RuntimeError(f"trigger {key}: {code} {body}")
        return body["id"]

    def await_committed(self, run_id: str, step: str, batches: int) -> dict:
        """The open attempt of `step` once the step has committed `batches` batches (its
        counters move with each batch's checkpoint)."""

        def committed() -> dict | None:
            s = step_of(run, step) if (run := self.run(run_id)) else None
            open_ = [a for a in (s or {}).get("attempts", []) if a["outcome"] is None]
            ready = s and s["records_in"] >= batches * BATCH_SIZE and open_
            return open_[-1] if ready and open_[-1]["executor"] else None

        return wait_until(committed, timeout=600, what=f"{step}: {batches} batches", every=0.05)

    def check_rows(self, label: str, run: dict) -> None:
        """Exactly n rows, distinct keys and ids 1..n in sandbox.customers and the JSONL."""
        n = self.n
        query = ("SELECT count(*), count(DISTINCT record_key), count(DISTINCT id), min(id),"
                 f" max(id) FROM sandbox.customers WHERE run_id = '{run['id']}'")  # fmt: skip
        rows = tuple(int(v) for v in self.project.sql(query)[0])
        self.res.expect(f"{label}: sandbox rows, distinct keys, distinct ids, min, max", rows,
                        (n, n, n, 1, n))  # fmt: skip
        out = self.project("exec", "-T", "coordinator", "python", "-c", _COUNT_JSONL, run["id"])
        self.res.expect(f"{label}: JSONL lines, distinct ids", tuple(map(int, out.split())),
                        (n, n))  # fmt: skip

    # --- the scenarios ---
    def sample_plan(self) -> str:
        doc = json.loads((ROOT / "fixtures" / "plans" / "demo.json").read_text())
        pipeline = self.api.create("sample", doc["plan"])
        run = self.wait_run(self.trigger(pipeline, "compose-sample"))
        self.res.add_run("the sample plan", run)
        self.res.expect("the sample plan", run["status"], RunStatus.SUCCEEDED)
        return pipeline

    def executor_killed(self, pipeline: str) -> str:
        """`docker kill` of the replica that holds to_table, a third of the way in; the step
        goes on on another one. Returns the killed replica (started again)."""
        run_id = self.trigger(pipeline, "compose-kill")
        attempt = self.await_committed(run_id, "to_table", max(1, -(-self.n // BATCH_SIZE) // 3))
        name = attempt["executor"].split(":")[0]
        replica = {n: r for r, n in self.names.items()}[name]
        killed_at = now_utc()
        self.docker("kill", self.replicas[replica])
        run = self.wait_run(run_id)
        self.res.add_run(f"import: {replica} ({name}) docker-killed mid-export", run)
        self.res.expect("import with an executor container killed", run["status"],
                        RunStatus.SUCCEEDED)  # fmt: skip
        step = step_of(run, "to_table")
        self.res.expect("to_table attempt outcomes", outcomes(step), [LEASE_EXPIRED, SUCCEEDED])
        other = (step["attempts"][-1]["executor"] or "").split(":")[0]
        self.res.check("to_table finished on another replica", other not in ("", name),
                       f"killed {name}, finished on {other}")  # fmt: skip
        self.check_rows("after docker kill", run)
        resumed = step["attempts"][-1]["started_at"]
        self.res.figures["docker kill"] = {
            "container": f"{replica} ({name})", "killed_at": iso(killed_at),
            "resumed_at": resumed, "kill_to_resumed_s": seconds(killed_at, resumed),
            "kill_to_finished_s": seconds(killed_at, run["finished_at"]),
        }  # fmt: skip
        self.timed(f"start {replica} again", lambda: self.docker("start", self.replicas[replica]))
        return replica

    def restart_policy(self, sample: str) -> None:
        """SIGKILL of executor-1's main process, from inside its container: the restart
        policy brings the container back under the same executor name, and it alone then runs
        the sample plan."""
        replica = EXECUTORS[0]
        cid, name = self.replicas[replica], self.names[replica]
        state = lambda: self.docker(  # noqa: E731
            "inspect", "-f", "{{.RestartCount}} {{.State.Status}}", cid
        ).split()
        before = int(state()[0])
        killed = time.monotonic()
        pid = self.project.docker.kill_main_process(cid)

        def restarted() -> bool:
            count, status = state()
            return int(count) > before and status == "running"

        wait_until(restarted, timeout=120, what=f"{replica} restarted by its policy", every=0.2)
        self.res.figures["restart policy"] = {
            "killed": f"{replica}: pid {pid} in its container (etl executor, docker-init's child)",
            "kill_to_running_again_s": round(time.monotonic() - killed, 2),
        }
        self.res.check(f"{replica} restarted by the restart policy", True, f"restarts: {before}+1")
        others = [self.replicas[r] for r in EXECUTORS[1:]]
        self.docker("stop", *others)
        try:
            run = self.wait_run(self.trigger(sample, "compose-after-restart"))
        finally:
            self.docker("start", *others)
        self.res.add_run(f"the sample plan on the restarted {replica} alone", run)
        self.res.expect("the sample plan after the restart", run["status"], RunStatus.SUCCEEDED)
        ran_on = {(a["executor"] or "").split(":")[0] for s in run["steps"] for a in s["attempts"]}
        self.res.expect(f"executors that ran it ({replica}'s name kept across its restart)",
                        ran_on, {name})  # fmt: skip

    def restart_mid_run(self, pipeline: str, service: str) -> None:
        """`docker compose restart SERVICE` once to_table has committed a quarter of its
        batches; the container really restarted before the run ended, and the run finishes
        with exact rows."""
        run_id = self.trigger(pipeline, f"compose-restart-{service}")
        self.await_committed(run_id, "to_table", max(1, -(-self.n // BATCH_SIZE) // 4))
        started_before = self.project.inspect(service, "{{.State.StartedAt}}")
        restart_at = now_utc()
        self.timed(f"restart {service}", lambda: self.project("restart", service))
        started_after = self.project.inspect(service, "{{.State.StartedAt}}")
        run = self.wait_run(run_id)
        self.res.add_run(f"import: docker compose restart {service} mid-run", run)
        self.res.check(f"{service} restarted before the run ended",
                       started_after != started_before
                       and (seconds(restart_at, run["finished_at"]) or 0) > 0,
                       f"container started {started_before} -> {started_after}; restart at "
                       f"{iso(restart_at)}, run finished {run['finished_at']}")  # fmt: skip
        self.res.expect(f"import across a {service} restart", run["status"], RunStatus.SUCCEEDED)
        self.check_rows(f"across a {service} restart", run)

    def memory_check(self) -> None:
        table = {m["container"]: m for m in self.memory.table()}
        for e in EXECUTORS:
            peak, limit = table[e]["peak_rss_mib"], table[e]["limit_mib"]
            self.res.check(f"{e}: peak resident memory under its limit", 0 < peak < limit,
                           f"{peak} MiB of {limit} MiB")  # fmt: skip


def drill_compose(res: DrillResult, records: int, fast: bool) -> None:
    """The whole drill; the project is taken down (`down -v`) whatever happened."""
    drill = ComposeDrill(res, records, fast)
    drill.prepare()
    try:
        drill.up()
        sample = drill.timed("sample plan", drill.sample_plan)
        pipeline = drill.api.create("compose-import", import_plan(path=IMPORT_FILE))
        drill.timed("import, executor killed", lambda: drill.executor_killed(pipeline))
        drill.timed("restart policy", lambda: drill.restart_policy(sample))
        for service in ("coordinator", "postgres"):
            drill.timed(f"import, {service} restarted", lambda s=service: drill.restart_mid_run(
                pipeline, s))  # fmt: skip
        drill.memory_check()
    finally:
        try:
            drill.down()
        finally:
            res.figures["durations_s"] = drill.timings
            res.figures["commands"] = drill.docker.summary()
