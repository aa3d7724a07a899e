"""Static checks of the container topology (docker-compose.yml, Dockerfile): the files are
parsed and compared with docs/configuration.md ("Configuration"). `etl drill compose` runs
them for real on Docker Engine (docs/compose.md)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
CONFIG_SOURCE = ROOT / "service" / "config.py"

SERVICES = {"postgres", "coordinator", "executor"}
ETL_SERVICES = ("coordinator", "executor")
# docs/configuration.md, "Configuration": the variables every deployment may set.
CONTRACT_VARIABLES = {
    "ETL_DATABASE_URL",
    "ETL_SANDBOX_URL",
    "ETL_DATA_DIR",
    "ETL_EXPORT_DIR",
    "ETL_REJECT_DIR",
    "ETL_API_BIND",
    "ETL_ADMIN_TOKEN",
    "ETL_LEASE_TTL_S",
    "ETL_HEARTBEAT_S",
    "ETL_SWEEP_S",
}
DIR_VARIABLES = ("ETL_DATA_DIR", "ETL_EXPORT_DIR", "ETL_REJECT_DIR")
IMAGE_ENTRYPOINT = ["etl"]


# --- helpers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    assert COMPOSE.is_file(), f"{COMPOSE.name} is missing"
    doc = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(doc, dict), "docker-compose.yml: not a mapping"
    assert isinstance(doc.get("services"), dict), "docker-compose.yml: no `services` mapping"
    return doc


def service(compose: dict, name: str) -> dict:
    svc = compose["services"].get(name)
    assert isinstance(svc, dict), f"service {name!r}: missing or not a mapping"
    return svc


def argv(value: object) -> list[str]:
    """A compose `command`/`entrypoint` (string or list) as a list of words."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    assert isinstance(value, list), f"not a string or a list: {value!r}"
    return [str(v) for v in value]


def effective_argv(svc: dict) -> list[str]:
    """What the container runs: the entrypoint (the image's `etl` unless overridden) + command."""
    entrypoint = argv(svc["entrypoint"]) if "entrypoint" in svc else IMAGE_ENTRYPOINT
    return entrypoint + argv(svc.get("command"))


def shell_script(name: str, svc: dict) -> str:
    """The script run by the service: the `sh -c SCRIPT` argument, else the argv joined."""
    words = effective_argv(svc)
    for i, word in enumerate(words[:-1]):
        if Path(word).name in {"sh", "bash"} and words[i + 1] == "-c":
            assert i + 2 < len(words), f"service {name!r}: `sh -c` without a script"
            return words[i + 2]
    return shlex.join(words)


def environment(name: str, svc: dict) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        pairs = (item.split("=", 1) if "=" in item else (item, "") for item in env)
        return {k: v for k, v in pairs}
    assert isinstance(env, dict), f"service {name!r}: key `environment` is not a mapping or list"
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def mounts(name: str, svc: dict) -> dict[str, dict]:
    """Container path -> {source, read_only} for every entry of `volumes`."""
    out = {}
    for entry in svc.get("volumes") or []:
        if isinstance(entry, str):
            parts = entry.split(":")
            assert len(parts) >= 2, f"service {name!r}: key `volumes`: no target in {entry!r}"
            source, target = parts[0], parts[1]
            read_only = len(parts) > 2 and "ro" in parts[2].split(",")
        else:
            assert isinstance(entry, dict), f"service {name!r}: key `volumes`: {entry!r}"
            source, target = entry.get("source", ""), entry.get("target")
            read_only = bool(entry.get("read_only"))
        out[str(target).rstrip("/") or "/"] = {"source": str(source), "read_only": read_only}
    return out


def is_bind(source: str) -> bool:
    return source.startswith((".", "/", "~", "$"))


def memory_limit(svc: dict) -> str | None:
    if "mem_limit" in svc:
        return str(svc["mem_limit"])
    limits = svc.get("deploy", {}).get("resources", {}).get("limits", {})
    return None if "memory" not in limits else str(limits["memory"])


def depends_on(name: str, svc: dict) -> dict[str, str]:
    """Dependency -> condition (`service_started` for the short list form)."""
    deps = svc.get("depends_on") or {}
    if isinstance(deps, list):
        return {d: "service_started" for d in deps}
    assert isinstance(deps, dict), f"service {name!r}: key `depends_on` is not a mapping or list"
    return {d: (spec or {}).get("condition", "service_started") for d, spec in deps.items()}


def healthcheck_text(name: str, svc: dict) -> str:
    check = svc.get("healthcheck")
    assert isinstance(check, dict), f"service {name!r}: key `healthcheck` is missing"
    assert not check.get("disable"), f"service {name!r}: key `healthcheck` is disabled"
    test = check.get("test")
    assert test, f"service {name!r}: key `healthcheck.test` is missing"
    return test if isinstance(test, str) else " ".join(str(t) for t in test)


def published_container_ports(svc: dict) -> set[int]:
    ports = set()
    for entry in svc.get("ports") or []:
        if isinstance(entry, dict):
            ports.add(int(entry["target"]))
        else:
            ports.add(int(str(entry).split("/")[0].rsplit(":", 1)[-1].split("-")[0]))
    return ports


def allowed_variables() -> set[str]:
    """The contract's variables plus the documented extras `service/config.py` reads."""
    read = set(re.findall(r"""["'](ETL_[A-Z0-9_]+)["']""", CONFIG_SOURCE.read_text("utf-8")))
    return CONTRACT_VARIABLES | read


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, pending = [], ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if full:
            keyword, _, rest = full.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


# --- compose: topology -----------------------------------------------------------------------


def test_services_are_exactly_the_topology(compose):
    assert set(compose["services"]) == SERVICES, (
        f"docker-compose.yml: services {sorted(compose['services'])}, expected {sorted(SERVICES)}"
    )


def test_postgres_official_image_healthcheck_and_volume(compose):
    svc = service(compose, "postgres")
    image = str(svc.get("image", ""))
    assert image.startswith("postgres:"), f"service 'postgres': key `image` is {image!r}"
    assert "pg_isready" in healthcheck_text("postgres", svc), (
        "service 'postgres': key `healthcheck.test` does not use pg_isready"
    )
    data = mounts("postgres", svc).get("/var/lib/postgresql/data")
    assert data, "service 'postgres': key `volumes` does not mount /var/lib/postgresql/data"
    assert not is_bind(data["source"]), "service 'postgres': the data volume should be named"
    assert data["source"] in (compose.get("volumes") or {}), (
        f"top-level key `volumes` does not declare {data['source']!r}"
    )


def test_postgres_init_creates_the_etl_database(compose):
    svc = service(compose, "postgres")
    env = environment("postgres", svc)
    inits = [
        m["source"]
        for target, m in mounts("postgres", svc).items()
        if target.startswith("/docker-entrypoint-initdb.d")
    ]
    texts = [(ROOT / s).read_text(encoding="utf-8") for s in inits if (ROOT / s).is_file()]
    creates = env.get("POSTGRES_DB") == "etl" or any(
        re.search(r"CREATE DATABASE\s+\"?etl\b", t, re.IGNORECASE) for t in texts
    )
    assert creates, (
        "service 'postgres': neither POSTGRES_DB=etl nor an init script under "
        "/docker-entrypoint-initdb.d creating the `etl` database"
    )
    assert env.get("POSTGRES_PASSWORD") or env.get("POSTGRES_HOST_AUTH_METHOD"), (
        "service 'postgres': key `environment` sets neither POSTGRES_PASSWORD nor "
        "POSTGRES_HOST_AUTH_METHOD (the image refuses to start)"
    )


def test_coordinator_migrates_seeds_then_runs(compose):
    svc = service(compose, "coordinator")
    script = shell_script("coordinator", svc)
    positions = []
    for step in ("etl migrate", "etl seed", "etl coordinator"):
        found = re.search(rf"(?<![\w-]){re.escape(step)}\b", script)
        assert found, f"service 'coordinator': key `command` does not run `{step}`: {script!r}"
        positions.append(found.start())
    assert positions == sorted(positions), (
        f"service 'coordinator': key `command` must run migrate, seed, coordinator in order: "
        f"{script!r}"
    )
    assert "||" not in script and ";" not in script, (
        f"service 'coordinator': key `command` must stop at a failed step (use &&): {script!r}"
    )


def test_coordinator_publishes_the_api(compose):
    svc = service(compose, "coordinator")
    assert 8080 in published_container_ports(svc), "service 'coordinator': key `ports` lacks 8080"
    bind = environment("coordinator", svc).get("ETL_API_BIND", "")
    assert bind == "0.0.0.0:8080", (
        f"service 'coordinator': key `environment.ETL_API_BIND` is {bind!r}, expected "
        "0.0.0.0:8080 (reachable through the published port)"
    )
    assert "/health" in healthcheck_text("coordinator", svc), (
        "service 'coordinator': key `healthcheck.test` does not query /health"
    )


def test_coordinator_waits_for_a_healthy_postgres(compose):
    deps = depends_on("coordinator", service(compose, "coordinator"))
    assert deps.get("postgres") == "service_healthy", (
        f"service 'coordinator': key `depends_on.postgres.condition` is {deps.get('postgres')!r}"
    )


def test_executor_command_limits_and_restart(compose):
    svc = service(compose, "executor")
    words = effective_argv(svc)
    assert words == ["etl", "executor", "--name", "executor-{hostname}"], (
        f"service 'executor': key `command` runs {words}, expected"
        " `etl executor --name executor-{hostname}` (one name per replica, its container's)"
    )
    limit = memory_limit(svc)
    assert limit is not None and limit.lower() in {"512m", "512mb", "536870912"}, (
        f"service 'executor': key `mem_limit` is {limit!r}, expected 512m"
    )
    assert svc.get("restart") == "unless-stopped", (
        f"service 'executor': key `restart` is {svc.get('restart')!r}, expected unless-stopped"
    )
    deps = depends_on("executor", svc)
    assert deps.get("postgres") == "service_healthy", (
        f"service 'executor': key `depends_on.postgres.condition` is {deps.get('postgres')!r}"
    )
    assert deps.get("coordinator") == "service_healthy", (
        "service 'executor': key `depends_on.coordinator.condition` should be service_healthy"
        " (the coordinator migrates before an executor starts)"
    )
    assert "ETL_DATABASE_URL" in healthcheck_text("executor", svc), (
        "service 'executor': key `healthcheck.test` does not reach the database"
    )


def test_executors_are_two_replicas_of_one_scalable_service(compose):
    svc = service(compose, "executor")
    replicas = (svc.get("deploy") or {}).get("replicas")
    assert replicas == 2, f"service 'executor': key `deploy.replicas` is {replicas!r}, expected 2"
    # `--scale executor=N` refuses a service with a fixed name or a published host port, and
    # replicas sharing one `hostname` would share one executor name.
    for key in ("container_name", "hostname", "ports"):
        assert key not in svc, f"service 'executor': key `{key}` stops it from scaling"


@pytest.mark.parametrize("name", ETL_SERVICES)
def test_platform_services_use_the_one_image(compose, name):
    svc = service(compose, name)
    build = svc.get("build")
    context = build if isinstance(build, str) else (build or {}).get("context")
    assert context in {".", "./"}, f"service {name!r}: key `build` should be the repository (.)"


# --- compose: environment and volumes --------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_only_contract_variables(compose, name):
    allowed = allowed_variables()
    env = environment(name, service(compose, name))
    unknown = sorted(k for k in env if k.startswith("ETL_") and k not in allowed)
    assert not unknown, (
        f"service {name!r}: key `environment` sets {unknown}, which neither"
        " docs/configuration.md nor service/config.py knows"
    )


def test_config_reads_every_contract_variable():
    read = allowed_variables() - CONTRACT_VARIABLES
    source = CONFIG_SOURCE.read_text(encoding="utf-8")
    missing = sorted(v for v in CONTRACT_VARIABLES if f'"{v}"' not in source)
    assert not missing, f"service/config.py does not read {missing} (extras it reads: {read})"


def test_every_platform_service_shares_the_databases(compose):
    envs = {n: environment(n, service(compose, n)) for n in ETL_SERVICES}
    for key in ("ETL_DATABASE_URL", "ETL_SANDBOX_URL", "ETL_ADMIN_TOKEN"):
        values = {n: env.get(key) for n, env in envs.items()}
        for n, value in values.items():
            assert value, f"service {n!r}: key `environment.{key}` is missing"
        assert len(set(values.values())) == 1, f"key `environment.{key}` differs: {values}"
    url = envs["coordinator"]["ETL_DATABASE_URL"]
    assert re.match(r"postgresql://[^@/]+@postgres:5432/etl$", url), (
        f"service 'coordinator': key `environment.ETL_DATABASE_URL` is {url!r}, expected "
        "postgresql://USER[:PASSWORD]@postgres:5432/etl"
    )
    token = envs["coordinator"]["ETL_ADMIN_TOKEN"]
    assert token.startswith("${ETL_ADMIN_TOKEN:?"), (
        f"service 'coordinator': key `environment.ETL_ADMIN_TOKEN` is {token!r}; take it from "
        "the host with no default (${ETL_ADMIN_TOKEN:?message}): compose refuses to start"
        " without one, so no known token is ever published"
    )


def test_the_api_port_is_chosen_by_etl_api_port_and_no_frontend_image_is_pulled(compose):
    (published,) = service(compose, "coordinator")["ports"]
    assert published == "${ETL_API_PORT:-8080}:8080"
    # `# syntax=` makes BuildKit pull a frontend image before it reads the Dockerfile
    assert not any(
        line.lstrip().lower().startswith("# syntax=")
        for line in DOCKERFILE.read_text(encoding="utf-8").splitlines()
    )


@pytest.mark.parametrize("name", ETL_SERVICES)
def test_directories_are_mounted_where_the_environment_points(compose, name):
    svc = service(compose, name)
    env, mounted = environment(name, svc), mounts(name, svc)
    for key in DIR_VARIABLES:
        path = env.get(key)
        assert path and path.startswith("/"), (
            f"service {name!r}: key `environment.{key}` is {path!r}, expected an absolute path"
        )
        assert path.rstrip("/") in mounted, (
            f"service {name!r}: key `volumes` mounts nothing at {path} ({key})"
        )
    for key in ("ETL_EXPORT_DIR", "ETL_REJECT_DIR"):
        m = mounted[env[key].rstrip("/")]
        assert not m["read_only"], f"service {name!r}: key `volumes`: {env[key]} is read-only"


def test_directories_are_shared_between_services(compose):
    for key in DIR_VARIABLES:
        sources = {}
        for name in ETL_SERVICES:
            svc = service(compose, name)
            sources[name] = mounts(name, svc)[environment(name, svc)[key].rstrip("/")]["source"]
        assert len(set(sources.values())) == 1, f"{key}: services mount different sources {sources}"


def test_mount_sources_exist(compose):
    declared = set(compose.get("volumes") or {})
    for name in sorted(SERVICES):
        for target, m in mounts(name, service(compose, name)).items():
            source = m["source"]
            if is_bind(source):
                if source.startswith("."):
                    assert (ROOT / source).exists(), (
                        f"service {name!r}: key `volumes`: {source} (-> {target}) does not exist"
                    )
            else:
                assert source in declared, (
                    f"service {name!r}: key `volumes`: named volume {source!r} is not declared"
                )


# --- Dockerfile ------------------------------------------------------------------------------


def test_dockerfile_base_user_install_and_entrypoint():
    assert DOCKERFILE.is_file(), "Dockerfile is missing"
    instructions = dockerfile_instructions()
    froms = [args for kw, args in instructions if kw == "FROM"]
    assert froms and froms[-1].split()[0].startswith("python:3.11"), (
        f"Dockerfile: key FROM is {froms}, expected python:3.11-slim"
    )
    users = [args for kw, args in instructions if kw == "USER"]
    assert users, "Dockerfile: key USER is missing (the image must not run as root)"
    assert users[-1].split(":")[0] not in {"root", "0"}, (
        f"Dockerfile: key USER is {users[-1]!r} (root)"
    )
    runs = [args for kw, args in instructions if kw == "RUN"]
    assert any(re.search(r"\bpip3? install\b[^&;]*\s\.(\s|$)", r) for r in runs), (
        "Dockerfile: key RUN never does `pip install .`"
    )
    entrypoints = [args for kw, args in instructions if kw == "ENTRYPOINT"]
    assert entrypoints, "Dockerfile: key ENTRYPOINT is missing"
    assert json.loads(entrypoints[-1]) == IMAGE_ENTRYPOINT, (
        f'Dockerfile: key ENTRYPOINT is {entrypoints[-1]}, expected ["etl"]'
    )
    assert ("WORKDIR", "/app") in instructions, "Dockerfile: key WORKDIR is not /app"


def test_dockerfile_copies_what_exists():
    for kw, args in dockerfile_instructions():
        if kw != "COPY" or "--from" in args:
            continue
        words = [w for w in shlex.split(args) if not w.startswith("--")]
        for source in words[:-1]:
            if any(c in source for c in "*?["):
                continue
            assert (ROOT / source).exists(), f"Dockerfile: key COPY {source}: does not exist"


def test_the_image_holds_no_tests_bench_or_drills():
    copied = {
        word.rstrip("/")
        for kw, args in dockerfile_instructions()
        if kw == "COPY" and "--from" not in args
        for word in shlex.split(args)[:-1]
    }
    for kept_out in ("tests", "bench", "drills", "docs", "."):
        assert kept_out not in copied, f"Dockerfile: key COPY {kept_out}: the image needs none"


def test_dockerignore_keeps_local_state_out():
    ignore = ROOT / ".dockerignore"
    assert ignore.is_file(), ".dockerignore is missing"
    patterns = {line.strip().rstrip("/") for line in ignore.read_text("utf-8").splitlines()}
    for entry in (".git", ".venv", "var"):
        assert entry in patterns, f".dockerignore: key {entry} is not ignored"
