"""`etl drill NAME`: failure drills, each on its own local topology (`etl up` on a fresh
database) or, for `compose`, on the Compose topology under Docker Engine, verified check by
check, reported in var/report/ (see docs/drills.md). The drills themselves are in
`drills.acceptance`, `drills.outages` and `drills.compose`; this module names them, gives
each its topology and runs them."""

from __future__ import annotations

import argparse
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from drills.acceptance import (
    drill_branch_failure,
    drill_burst_30,
    drill_coordinator_restart,
    drill_crash_after_export,
    drill_import_100k,
    drill_reject_file,
    drill_repeat_trigger,
)
from drills.compose import drill_compose
from drills.engine import Docker, EngineMissing
from drills.failover import drill_failover
from drills.outages import drill_connections_cut, drill_executor_frozen, drill_postgres_restart
from drills.pgcluster import PrivateCluster
from drills.pgfailover import FailoverPair
from drills.report import DrillResult, write_report
from drills.swarm import drill_swarm
from drills.topology import Topology

SCENARIOS: dict[str, Callable[[Topology, DrillResult, int], None]] = {
    "import-100k": drill_import_100k,
    "crash-after-export": drill_crash_after_export,
    "coordinator-restart": drill_coordinator_restart,
    "burst-30": drill_burst_30,
    "repeat-trigger": drill_repeat_trigger,
    "branch-failure": drill_branch_failure,
    "reject-file": drill_reject_file,
    "postgres-restart": drill_postgres_restart,
    "executor-frozen": drill_executor_frozen,
    "connections-cut": drill_connections_cut,
    "failover": drill_failover,
}
# Drills that bring their own topology (not `etl up`): (result, records, fast).
OWN_TOPOLOGY: dict[str, Callable[[DrillResult, int, bool], None]] = {
    "compose": drill_compose,
    "swarm": drill_swarm,
}
DRILLS = (*SCENARIOS, *OWN_TOPOLOGY)
FAULTS = {  # ETL_FAULT of the drill's topology (see actors/faults.py)
    "crash-after-export": "crash_after_export:step=to_table:batch=3",
    "coordinator-restart": "slow_batches:step=normalize:ms=500",
    # runs stay queued during the burst, even on a busy machine
    "burst-30": "slow_batches:step=read:ms=3000",
    # a1 must outlast the claim of b_fail: an executor that just finished a step looks at
    # its queue again only after dramatiq-pg's consumer backoff (up to ~1 s)
    "branch-failure": "fail_attempts:step=b_fail:times=1,slow_batches:step=a1:ms=1000",
    # the exports outlast a restart, a freeze past the lease, a cut of connections
    "postgres-restart": "slow_batches:step=to_table:ms=200",
    "executor-frozen": "slow_batches:step=to_file:ms=200",
    "connections-cut": "slow_batches:step=to_table:ms=200",
}
# Drills that restart or kill PostgreSQL: never the user's server, a cluster of their own.
PRIVATE_CLUSTER = {"postgres-restart": PrivateCluster, "failover": FailoverPair}


def run_one(name: str, *, fast: bool, records: int) -> DrillResult:
    """Run drill `name` on its own topology; never raises (an error fails the drill)."""
    if name in OWN_TOPOLOGY:
        return run_own(name, fast=fast, records=records)
    cluster = PRIVATE_CLUSTER[name]() if name in PRIVATE_CLUSTER else None
    env = {"ETL_FAULT": FAULTS[name]} if name in FAULTS else {}
    topo = Topology(name, fast=fast, env=env, cluster=cluster)
    res = DrillResult(name, _command(name, fast, records), topo.topology_env)
    print(f"drill {name}: database {topo.db_name}, logs {topo.log_path}", flush=True)
    try:
        if cluster is not None:
            cluster.start()
            res.notes.append(f"private PostgreSQL cluster on port {cluster.port} ({cluster.dir})")
        topo.prepare()
        topo.start()
        SCENARIOS[name](topo, res, records)
    except Exception as exc:
        res.error = f"{type(exc).__name__}: {exc}"[:3000]
        traceback.print_exc()
    finally:
        try:
            topo.stop()
        except Exception as exc:
            res.notes.append(f"stopping the topology failed: {exc}")
    res.finish(topo.sampler.table())
    _print_result(res)
    return res


def run_own(name: str, *, fast: bool, records: int) -> DrillResult:
    """Run drill `name`, which brings its own topology; never raises."""
    res = DrillResult(name, _command(name, fast, records), {})
    print(f"drill {name}: on Docker Engine, logs in var/drills/{name}/", flush=True)
    try:
        OWN_TOPOLOGY[name](res, records, fast)
    except Exception as exc:
        res.error = f"{type(exc).__name__}: {exc}"[:3000]
        traceback.print_exc()
    res.finish(res.memory)
    _print_result(res)
    return res


def _command(name: str, fast: bool, records: int) -> str:
    """The command that reproduces drill `name` as it was run."""
    command = f".venv/bin/etl drill {name}" + (" --fast" if fast else "")
    if name in ("import-100k", "compose", "swarm", "failover") and records != 100_000:
        command += f" --records {records}"
    return command


def _print_result(res: DrillResult) -> None:
    print(f"drill {res.name}: {'PASS' if res.passed else 'FAIL'} in {res.duration_s} s", flush=True)
    for c in res.checks:
        print(f"  {'ok  ' if c['passed'] else 'FAIL'} {c['check']}  [{c['detail'][:120]}]")


def configure_drill(parser: argparse.ArgumentParser) -> None:
    """`etl drill NAME [--records N] [--fast | --production-timings] [--report-dir DIR]`."""
    parser.add_argument("name", choices=[*DRILLS, "all", "ci"], metavar="NAME",
                        help=f"one of {', '.join(DRILLS)}; all; ci (= all --fast)")  # fmt: skip
    parser.add_argument("--records", type=int, default=100_000,
                        help="records of import-100k, compose, swarm, failover")  # fmt: skip
    timing = parser.add_mutually_exclusive_group()
    timing.add_argument("--fast", action="store_true",
                        help="lease 3 s, heartbeat 1 s, sweep 0.5 s (ci always)")  # fmt: skip
    timing.add_argument("--production-timings", dest="fast", action="store_false",
                        help="lease 30 s, heartbeat 10 s, sweep 2 s (the default)")  # fmt: skip
    parser.add_argument("--report-dir", type=Path, default=Path("var/report"))


def run_drill(args: argparse.Namespace) -> int:
    """Run the drill(s) and write the report; 0 only if every check of every drill passed."""
    fast = args.fast or args.name == "ci"
    names = DRILLS if args.name in ("all", "ci") else (args.name,)
    if "compose" in names:  # checked first: not after every other drill has run
        try:
            Docker().ensure_engine()
        except EngineMissing as exc:
            print(f"etl drill {args.name}: the compose drill needs Docker: {exc}", flush=True)
            return 1
    started = time.monotonic()
    results = [run_one(name, fast=fast, records=args.records) for name in names]
    write_report(args.report_dir, [r.as_dict() for r in results], merge=len(names) == 1)
    failed = [r.name for r in results if not r.passed]
    print(f"\n{len(results) - len(failed)}/{len(results)} drills passed in "
          f"{time.monotonic() - started:.0f} s; report: {args.report_dir}/report.md"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="etl drill")
    configure_drill(_parser)
    raise SystemExit(run_drill(_parser.parse_args()))
