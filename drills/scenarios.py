"""`etl drill NAME`: failure drills, each on its own local topology (`etl up` on a fresh
database), verified check by check, reported in var/report/ (see docs/drills.md)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psycopg2

from dag import (
    BATCH_SIZE,
    GLOBAL_ACTIVE_LIMIT,
    PIPELINE_ACTIVE_LIMIT,
    PIPELINE_QUEUE_LIMIT,
    PIPELINE_RUNNING_LIMIT,
    AttemptOutcome,
    RunStatus,
    SkipReason,
    StepStatus,
)
from dag.plan import CONTINUE_INDEPENDENT, STOP_DEPENDENTS
from ddl import connect, connector
from drills.harness import concurrently, now_utc
from drills.pgcluster import PrivateCluster
from drills.report import DrillResult, iso, parse_ts, seconds, write_report
from drills.topology import Topology
from drills.workload import COLUMNS, generate_csv, import_plan
from service.domain.schedules import trigger_key
from service.scheduler import Scheduler

SUCCEEDED, LEASE_EXPIRED = AttemptOutcome.SUCCEEDED, AttemptOutcome.LEASE_EXPIRED
SKIPPED = RunStatus.SKIPPED


def _step(run: dict, name: str) -> dict:
    return next(s for s in run["steps"] if s["name"] == name)


def _outcomes(step: dict) -> list[str | None]:
    return [a["outcome"] for a in step["attempts"]]


def _batches_done(topo: Topology, run_id: str, step: str) -> list[int]:
    query = "SELECT batches_done FROM attempts WHERE run_id = %s AND step_name = %s ORDER BY number"
    return [r[0] for r in topo.sql(query, run_id, step)]


def _await_batches(topo: Topology, run_id: str, step: str, n: int) -> tuple:
    """Wait until the step's claimed, unfinished attempt committed `n` batches; returns
    (number, executor, batches_done)."""
    query = (
        "SELECT number, executor, batches_done FROM attempts WHERE run_id = %s AND step_name = %s"
        " AND outcome IS NULL AND executor IS NOT NULL AND batches_done >= %s"
    )
    found = lambda: (rows := topo.sql(query, run_id, step, n)) and rows[0]  # noqa: E731
    return topo.wait_for(found, timeout=900, what=f"{step}: {n} batches", every=0.02)


def _check_exports(topo: Topology, res: DrillResult, run: dict, n: int, jsonl: bool) -> None:
    """Exactly n rows, ids 1..n, in sandbox.customers for the run (and in the JSONL file)."""
    query = "SELECT count(*), count(DISTINCT record_key), count(DISTINCT id), min(id), max(id)"
    rows = topo.sql(query + " FROM sandbox.customers WHERE run_id = %s", run["id"])[0]
    res.expect("sandbox rows, distinct keys, distinct ids, min id, max id", rows, (n, n, n, 1, n))
    staged = topo.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'etl_stage'")[0][0]
    res.expect("staging tables left behind", staged, 0)
    if jsonl:
        path = topo.exports / run["id"] / "customers.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        ids = {json.loads(line)["id"] for line in lines}
        res.expect("JSONL export: lines, distinct ids", (len(lines), len(ids)), (n, n))


# --- the drills ------------------------------------------------------------------------------


def drill_import_100k(topo: Topology, res: DrillResult, records: int) -> None:
    """A clean reference run, then the same pipeline again with the executor that holds the
    table export's attempt SIGKILLed a third of the way into the export."""
    n, n_batches = records, -(-records // BATCH_SIZE)
    res.figures["input"] = generate_csv(topo.data / "customers.csv", n)
    pipeline = topo.create("import-100k", import_plan())
    clean = topo.wait_run(topo.trigger(pipeline, "clean")[1]["id"], timeout=900)
    res.add_run("clean reference run", clean)
    res.expect("clean run", clean["status"], RunStatus.SUCCEEDED)
    run_id = topo.trigger(pipeline, "drill")[1]["id"]
    _, executor, _ = _await_batches(topo, run_id, "to_table", max(1, n_batches // 3))
    kill = topo.kill_role(executor.split(":")[0])
    run = topo.wait_run(run_id, timeout=900)
    res.add_run("drill run: executor SIGKILLed mid-export", run)
    res.expect("drill run", run["status"], RunStatus.SUCCEEDED)
    step = _step(run, "to_table")
    res.expect("to_table attempt outcomes", _outcomes(step), [LEASE_EXPIRED, SUCCEEDED])
    _check_exports(topo, res, run, n, jsonl=True)
    digests = {s["name"]: (s["input_digest"], s["output_digest"]) for s in run["steps"]}
    clean_digests = {s["name"]: (s["input_digest"], s["output_digest"]) for s in clean["steps"]}
    res.check("every step's digests equal the clean run's", digests == clean_digests, "")
    counts = {(s["records_in"], s["records_out"]) for s in run["steps"]}
    res.expect("records in/out of every step", counts, {(n, n)})
    done = _batches_done(topo, run_id, "to_table")
    res.check(
        "committed batches processed twice: sum(batches_done) - batches <= 1",
        0 <= sum(done) - n_batches <= 1,
        f"batches_done per attempt {done}, {n_batches} batches",
    )
    first, second = (step["attempts"] + [{}, {}])[:2]
    killed, resumed = kill["killed_at"], second.get("started_at")
    res.figures["recovery"] = {
        **kill,
        "lease_reaped_at": first.get("finished_at"),
        "resumed_at": resumed,
        "resumed_on": second.get("executor"),
        "finished_at": run["finished_at"],
        "kill_to_reaped_s": seconds(killed, first.get("finished_at")),
        "kill_to_resumed_s": seconds(killed, resumed),
        "resumed_to_step_finished_s": seconds(resumed, step["finished_at"]),
        "kill_to_run_finished_s": seconds(killed, run["finished_at"]),
    }
    res.figures["records_processed_twice"] = {
        "committed_batches_redone": sum(done) - n_batches,
        "at_most_records": BATCH_SIZE,
        "why": f"attempt 1 committed {done[0]} of {n_batches} batches; only the batch in flight "
        f"at the kill (#{done[0] + 1}) was processed again",
    }
    both = {"clean": clean, "drill": run}
    res.figures["run_s"] = {k: seconds(r["started_at"], r["finished_at"]) for k, r in both.items()}


def drill_crash_after_export(topo: Topology, res: DrillResult, records: int) -> None:
    """ETL_FAULT makes the executor SIGKILL itself right after exporting batch 3 of to_table,
    before that batch's checkpoint commits; the recovery exports batch 3 again."""
    n = 5000
    generate_csv(topo.data / "customers.csv", n)
    run = topo.wait_run(topo.trigger(topo.create("crash", import_plan(jsonl=False)))[1]["id"])
    res.add_run("run with crash_after_export:step=to_table:batch=3", run)
    res.expect("run", run["status"], RunStatus.SUCCEEDED)
    step = _step(run, "to_table")
    res.expect("to_table attempt outcomes", _outcomes(step), [LEASE_EXPIRED, SUCCEEDED])
    _check_exports(topo, res, run, n, jsonl=False)
    done = _batches_done(topo, run["id"], "to_table")
    res.expect("to_table batches_done per attempt", done, [2, 8])
    counters = (step["records_in"], step["records_out"], step["rejected"])
    res.expect("to_table records in, out, rejected", counters, (n, n, 0))
    same = step["output_digest"] == _step(run, "normalize")["output_digest"]
    res.check("to_table output digest == its input's", same, step["output_digest"])
    res.expect("executor kills in up.log", topo.log_tail(10**8).count("exited with -9"), 1)
    res.figures["records_processed_twice"] = {
        "records": BATCH_SIZE,
        "why": "batch 3: exported twice",
    }


def drill_coordinator_restart(topo: Topology, res: DrillResult, records: int) -> None:
    """SIGKILL the coordinator mid-run (normalize slowed by ETL_FAULT); `etl up` restarts it."""
    generate_csv(topo.data / "customers.csv", 5000)
    run_id = topo.trigger(topo.create("coordinator", import_plan(jsonl=False)))[1]["id"]
    _await_batches(topo, run_id, "normalize", 2)
    kill = topo.kill_role("coordinator")
    run = topo.wait_run(run_id)
    res.add_run("run with the coordinator SIGKILLed", run)
    res.expect("run", run["status"], RunStatus.SUCCEEDED)
    attempts = {s["name"]: _outcomes(s) for s in run["steps"]}
    res.expect("attempt outcomes", attempts, {n: [SUCCEEDED] for n in attempts})
    _check_exports(topo, res, run, 5000, jsonl=False)
    time.sleep(8)  # long enough for a crash-looping coordinator to show
    roles = Counter(topo.processes().values())
    exits = topo.log_tail(10**8).count("coordinator exited")
    res.expect("'coordinator exited' lines in up.log (1 = restarted once, stays up)", exits, 1)
    masters = (roles["coordinator"], roles["gunicorn master"])
    res.expect("live coordinators, live gunicorn masters", masters, (1, 1))
    res.expect("orphaned processes", sorted(r for r in roles if "orphan" in r), [])
    next_step = _step(run, "to_table")["started_at"]
    res.figures["recovery"] = {
        **kill,
        "next_step_started_at": next_step,
        "kill_to_next_step_started_s": seconds(kill["killed_at"], next_step),
        "kill_to_run_finished_s": seconds(kill["killed_at"], run["finished_at"]),
    }


def _sample_active(topo: Topology, stop: threading.Event, peaks: dict[str, int]) -> None:
    """Until `stop`: peaks of the queued+running total, and per pipeline of running runs and
    of waiting ones (behind the head: an admitted run is `queued` until the advancer starts it)."""
    conn = connect(topo.db_url, "etl-drill-sampler")
    conn.autocommit = True
    with conn.cursor() as cur:
        while not stop.wait(0.02):
            cur.execute(
                "SELECT count(*) FILTER (WHERE status = 'running'),"
                " count(*) FILTER (WHERE status = 'queued') FROM runs"
                " WHERE status IN ('queued', 'running') GROUP BY pipeline_id"
            )
            rows = cur.fetchall()
            peaks["samples"] += 1
            peaks["total"] = max(peaks["total"], sum(r + q for r, q in rows))
            peaks["running"] = max([peaks["running"], *(r for r, _ in rows)])
            peaks["queued"] = max([peaks["queued"], *(q for _, q in rows)])
            peaks["waiting"] = max([peaks["waiting"], *(q - (r == 0 < q) for r, q in rows)])
    conn.close()


TINY_PLAN = {"steps": [{"name": "read", "type": "ingest",
                        "config": {"source": "file", "path": "tiny.csv"}}]}  # fmt: skip


def _check_burst_answers(res: DrillResult, answers: list) -> tuple[list[dict], Counter]:
    """What the burst's answers must show: only 201 and 429 (skipped, queue_full or busy),
    the limits per pipeline and in all, each refusal for the limit it names. Returns the
    admitted runs and the answers by HTTP status."""
    codes = Counter(code for code, _ in answers)
    skipped = [b for c, b in answers if c == 429]
    reasons = Counter((b.get("status"), b.get("reason")) for b in skipped)
    admitted = Counter(b["pipeline_id"] for c, b in answers if c == 201)
    per_pipe = sorted(admitted.values(), reverse=True)
    by_reason = dict(Counter(str(b.get("reason")) for b in skipped))
    res.figures["answers"] = {"by_status": dict(codes), "skipped_by_reason": by_reason}
    res.expect("answers other than 201 and 429", sum(codes.values()) - codes[201] - codes[429], 0)
    odd = set(reasons) - {(SKIPPED, SkipReason.QUEUE_FULL), (SKIPPED, SkipReason.BUSY)}
    res.expect("429 answers other than skipped/queue_full|busy", odd, set())
    runs = [b for c, b in answers if c == 201]
    res.check(
        f"at most {GLOBAL_ACTIVE_LIMIT} admitted", len(runs) <= GLOBAL_ACTIVE_LIMIT, len(runs)
    )
    res.check(
        f"at most {PIPELINE_ACTIVE_LIMIT} admitted per pipeline",
        per_pipe[0] <= PIPELINE_ACTIVE_LIMIT,
        per_pipe,
    )
    full = {b["pipeline_id"] for b in skipped if b.get("reason") == SkipReason.QUEUE_FULL}
    fits = all(admitted[p] == PIPELINE_ACTIVE_LIMIT for p in full) and (
        not reasons[SKIPPED, SkipReason.BUSY] or len(runs) == GLOBAL_ACTIVE_LIMIT
    )
    res.check(
        f"queue_full only at {PIPELINE_RUNNING_LIMIT} running + {PIPELINE_QUEUE_LIMIT} queued,"
        f" busy only at {GLOBAL_ACTIVE_LIMIT}",
        fits,
        per_pipe,
    )
    return runs, codes


def drill_burst_30(topo: Topology, res: DrillResult, records: int) -> None:
    """30 concurrent triggers over 8 pipelines of slow one-step runs (6, 6, then 3 each)."""
    generate_csv(topo.data / "tiny.csv", 10)
    pipes = [topo.create(f"burst-{i}", TINY_PLAN) for i in range(8)]
    peaks = dict.fromkeys(("samples", "total", "running", "queued", "waiting"), 0)
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_active, args=(topo, stop, peaks), daemon=True)
    sampler.start()
    targets = [pipes[i % 8] for i in range(24)] + [pipes[i % 2] for i in range(6)]
    answers = concurrently([lambda p=p: topo.trigger(p) for p in targets])
    runs, codes = _check_burst_answers(res, answers)
    runs = [topo.wait_run(b["id"]) for b in runs]
    stop.set()
    sampler.join(10)
    res.figures["sampled_peaks"] = peaks
    limits = (
        peaks["total"] <= GLOBAL_ACTIVE_LIMIT
        and peaks["running"] <= PIPELINE_RUNNING_LIMIT
        and peaks["waiting"] <= PIPELINE_QUEUE_LIMIT
    )
    res.check(
        f"sampled peaks: total <= {GLOBAL_ACTIVE_LIMIT}, per pipeline running <="
        f" {PIPELINE_RUNNING_LIMIT}, waiting <= {PIPELINE_QUEUE_LIMIT}",
        limits,
        peaks,
    )
    statuses = Counter(r["status"] for r in runs)
    res.expect("admitted runs by status", statuses, Counter({RunStatus.SUCCEEDED: codes[201]}))
    recorded = topo.sql("SELECT count(*) FROM runs WHERE status = %s", SKIPPED)[0][0]
    res.expect("skipped runs recorded", recorded, codes[429])
    started = {r["id"]: parse_ts(r["started_at"]) for r in runs}
    query = "SELECT id::text FROM runs WHERE pipeline_id = %s AND status <> 'skipped'"
    disorder = []
    for p in pipes:
        ids = [r[0] for r in topo.sql(query + " ORDER BY queue_seq", p)]
        disorder += [p] if ids != sorted(ids, key=started.__getitem__) else []
    res.expect("pipelines whose runs did not start in trigger order", disorder, [])
    for run in runs[:3]:
        res.add_run("admitted run (the first three of the burst)", run)


def drill_repeat_trigger(topo: Topology, res: DrillResult, records: int) -> None:
    """50 concurrent POSTs with one trigger key; one schedule fire delivered twice."""
    generate_csv(topo.data / "tiny.csv", 10)
    pipeline = topo.create("repeat", TINY_PLAN)
    answers = concurrently([lambda: topo.trigger(pipeline, "same-key")] * 50)
    res.expect("answers by status", Counter(c for c, _ in answers), Counter({201: 1, 200: 49}))
    ids = {b.get("id") for _, b in answers}
    res.expect("distinct run ids answered", len(ids), 1)
    query = "SELECT count(*) FROM runs WHERE pipeline_id = %s AND trigger_key = 'same-key'"
    res.expect("run rows with the key", topo.sql(query, pipeline)[0][0], 1)
    run = topo.wait_run(ids.pop())
    res.add_run("the one run of 50 identical triggers", run)
    res.expect("that run", run["status"], RunStatus.SUCCEEDED)
    code, schedule = topo.call("POST", f"/pipelines/{pipeline}/schedules", {"every_minutes": 5})
    res.expect("schedule created", code, 201)
    fire_time = parse_ts(schedule["next_fire_at"])
    connect = connector(topo.db_url, "etl-drill-scheduler")
    scheduler = Scheduler(connect, lambda run_id, trace_id: None)  # the sweep advances it
    fires = concurrently([lambda: scheduler.fire(schedule["id"], fire_time)] * 2)
    outcomes = sorted(a.outcome for a in fires)
    res.expect("one fire delivered twice, concurrently", outcomes, ["created", "existing"])
    key = trigger_key(schedule["id"], fire_time)
    rows = topo.sql("SELECT id::text FROM runs WHERE trigger_key = %s", key)
    res.expect(f"runs with key {key}", len(rows), 1)
    if rows:
        fired = topo.wait_run(rows[0][0])
        res.add_run("the scheduled run", fired)
        res.expect("the scheduled run", fired["status"], RunStatus.SUCCEEDED)


def _branch_plan(policy: str) -> dict:
    """read -> a1 (slowed) -> a2, and read -> b_fail (fails once, 1 attempt) -> b_down."""
    trim = {"op": "trim", "columns": ["name"]}
    return {"on_failure": policy, "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "customers.csv", "columns": COLUMNS}},
        {"name": "a1", "type": "transform", "depends_on": ["read"], "config": trim},
        {"name": "a2", "type": "transform", "depends_on": ["a1"], "config": trim},
        {"name": "b_fail", "type": "transform", "depends_on": ["read"], "config": trim,
         "retry": {"max_attempts": 1}},
        {"name": "b_down", "type": "export", "depends_on": ["b_fail"],
         "config": {"target": "file", "path": "b.jsonl"}},
    ]}  # fmt: skip


def drill_branch_failure(topo: Topology, res: DrillResult, records: int) -> None:
    """A failing branch under both policies, then a resume that re-runs only what failed."""
    generate_csv(topo.data / "customers.csv", 1500)
    branch_a = {"read": StepStatus.SUCCEEDED, "a1": StepStatus.SUCCEEDED}
    branch_b = {"b_fail": StepStatus.FAILED, "b_down": StepStatus.UPSTREAM_FAILED}
    policies = ((CONTINUE_INDEPENDENT, StepStatus.SUCCEEDED), (STOP_DEPENDENTS, StepStatus.NOT_RUN))
    for policy, a2 in policies:
        pipeline = topo.create(f"branch-{policy}", _branch_plan(policy))
        run = topo.wait_run(topo.trigger(pipeline)[1]["id"])
        res.add_run(f"{policy}: first run", run)
        res.expect(f"{policy}: run status", run["status"], RunStatus.FAILED)
        states = {s["name"]: s["status"] for s in run["steps"]}
        res.expect(f"{policy}: step states", states, {**branch_a, "a2": a2, **branch_b})
        ran = lambda r, n: (_step(r, n)["attempts"], _step(r, n)["output_digest"])  # noqa: E731
        kept = {n: ran(run, n) for n, state in states.items() if state == StepStatus.SUCCEEDED}
        code = topo.call("POST", f"/runs/{run['id']}/resume")[0]
        res.expect(f"{policy}: POST /runs/{{id}}/resume", code, 202)
        after = topo.wait_run(run["id"])
        res.add_run(f"{policy}: after the resume", after)
        res.expect(f"{policy}: resumed run", after["status"], RunStatus.SUCCEEDED)
        same = {n: ran(after, n) for n in kept} == kept
        res.check(f"{policy}: succeeded steps kept their attempts and output", same, sorted(kept))
        rerun = {s["name"]: _outcomes(s) for s in after["steps"] if s["name"] not in kept}
        want = {n: [AttemptOutcome.FAILED] * (n == "b_fail") + [SUCCEEDED] for n in rerun}
        res.expect(f"{policy}: attempts of the re-run steps", rerun, want)


BAD_ROWS = {7: "7,Bob,12x,2024-01-07", 12: "12,Cy,5,2024-13-45", 15: "15,Dee,3"}
REJECT_CSV = "id,name,amount,signup\n" + "".join(
    BAD_ROWS.get(i, f"{i},Name {i},{i * 10},2024-01-{i:02d}") + "\n" for i in range(1, 21)
) + '21,"Eve,1,2024-01-21\n'  # fmt: skip  # an unterminated quote runs to the end of the file
EXPECTED_REJECTS = [(8, "amount", "int64"), (13, "signup", "date"),
                    (16, None, "wrong number of fields"), (22, None, "unterminated")]  # fmt: skip


def drill_reject_file(topo: Topology, res: DrillResult, records: int) -> None:
    """Known bad rows in `reject` mode (reject file, counters) and in `stop` mode."""
    (topo.data / "bad.csv").write_text(REJECT_CSV)
    for mode in ("reject", "stop"):
        plan = {"on_row_error": mode, "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "bad.csv", "columns": COLUMNS}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "file", "path": "good.jsonl"}}]}  # fmt: skip
        run = topo.wait_run(topo.trigger(topo.create(f"rows-{mode}", plan))[1]["id"])
        res.add_run(f"on_row_error={mode}", run)
        read = _step(run, "read")
        path = topo.rejects / run["id"] / "read.jsonl"
        if mode == "stop":
            states = (run["status"], read["status"], _step(run, "out")["status"])
            failed = (RunStatus.FAILED, StepStatus.FAILED, StepStatus.UPSTREAM_FAILED)
            res.expect("stop: run, read, out", states, failed)
            res.expect("stop: read attempt outcomes", _outcomes(read), [AttemptOutcome.INPUT_ERROR])
            error = read["error"] or ""
            res.check(
                "stop: error names line 8, column amount", "line 8, column 'amount'" in error, error
            )
            res.expect("stop: a reject file exists", path.exists(), False)
            continue
        lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        got = [(x["line"], x["column"], want in x["reason"] and bool(x["raw"]))
               for x, (_, _, want) in zip(lines, EXPECTED_REJECTS, strict=False)]  # fmt: skip
        want = [(line, column, True) for line, column, _ in EXPECTED_REJECTS]
        res.expect("reject file: (line, column, reason fits and raw kept)", got, want)
        res.figures["reject_file"] = lines
        res.expect("reject: run", run["status"], RunStatus.SUCCEEDED)
        counters = (read["records_in"], read["records_out"], read["rejected"])
        res.expect("reject: read records in, out, rejected", counters, (21, 17, 4))
        out = topo.exports / run["id"] / "good.jsonl"
        exported = len(out.read_text().splitlines()) if out.exists() else None
        res.expect("reject: records in the export file", exported, 17)


def _committed_batches(topo: Topology, run_id: str, step: str) -> int | None:
    """Batches the step's attempts committed so far; None while the database is away."""
    query = "SELECT coalesce(sum(batches_done), 0) FROM attempts"
    query += " WHERE run_id = %s AND step_name = %s"
    try:
        return int(topo.sql(query, run_id, step)[0][0])
    except psycopg2.Error:
        return None


def _await_resumed(topo: Topology, run_id: str, step: str) -> str:
    """The moment (ISO) the step commits a batch past what it had committed when the database
    first answered here: "step resumed". Polled every 50 ms."""
    base = topo.wait_for(
        lambda: (n := _committed_batches(topo, run_id, step)) is not None and (n,),
        timeout=300, what="the database answers", every=0.05,
    )[0]  # fmt: skip
    topo.wait_for(
        lambda: (_committed_batches(topo, run_id, step) or 0) > base,
        timeout=300, what=f"{step} commits a batch again", every=0.05,
    )  # fmt: skip
    return iso(now_utc()) or ""


def _check_quiet(topo: Topology, res: DrillResult) -> None:
    """No process restarted and nothing logged at CRITICAL (a consumer thread that fell over)."""
    log = topo.log_tail(10**8)
    res.expect("process exits in up.log", log.count(" exited with "), 0)
    res.expect("CRITICAL lines in up.log", log.count("CRITICAL"), 0)


def _export_leftovers(topo: Topology, run_id: str, published: list[str]) -> list[str]:
    """Files in the run's export directory other than `published`, and staged chunks or
    temporary files anywhere under the export directory (none once the run is over)."""
    run_dir = topo.exports / run_id
    found = [str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()]
    staged = [
        str(p.relative_to(topo.exports))
        for p in topo.exports.rglob("*")
        if p.is_file() and p.suffix in (".chunk", ".tmp")
    ]
    return sorted(set(found) - set(published)) + sorted(staged)


def _stale_gave_up(topo: Topology, role: str, run_id: str) -> str | None:
    """What the woken executor's step logged when it found its lease gone (None before)."""
    for line in topo.log_tail(10**8).splitlines()[-400:]:
        process, _, text = line.partition(" | ")
        if process.strip() != role or not text.startswith("{"):
            continue
        entry = json.loads(text)
        if entry.get("run_id") == run_id and "lease" in entry.get("message", ""):
            return entry["message"][:300]
    return None


def drill_postgres_restart(topo: Topology, res: DrillResult, records: int) -> None:
    """The drill's private PostgreSQL cluster is restarted (fast shutdown, 2 s down) while the
    table export runs; every process reconnects and the step resumes from its checkpoint."""
    n = RESTART_RECORDS
    generate_csv(topo.data / "customers.csv", n)
    run_id = topo.trigger(topo.create("pg-restart", import_plan()))[1]["id"]
    _, executor, done = _await_batches(topo, run_id, "to_table", 5)
    assert topo.cluster is not None
    down_at, back_at = topo.cluster.restart(down_s=2)
    resumed_at = _await_resumed(topo, run_id, "to_table")
    run = topo.wait_run(run_id, timeout=900)
    res.add_run("run with PostgreSQL restarted mid-export", run)
    res.expect("run", run["status"], RunStatus.SUCCEEDED)
    step = _step(run, "to_table")
    res.check(
        "to_table resumed without waiting out its lease (no lease_expired attempt)",
        LEASE_EXPIRED not in _outcomes(step),
        _outcomes(step),
    )
    _check_exports(topo, res, run, n, jsonl=True)
    res.expect("API health after the restart", topo.call("GET", "/health", auth=False)[0], 200)
    res.figures["recovery"] = {
        "executor": executor,
        "batches_committed_before": done,
        "postgres_down_at": iso(down_at),
        "postgres_back_at": iso(back_at),
        "step_resumed_at": resumed_at,
        "postgres_back_to_step_resumed_s": seconds(back_at, resumed_at),
        "postgres_back_to_run_finished_s": seconds(back_at, run["finished_at"]),
        "to_table_attempts": _outcomes(step),
    }


def drill_executor_frozen(topo: Topology, res: DrillResult, records: int) -> None:
    """The executor holding the file export is frozen (SIGSTOP) past its lease; the other one
    takes the step over and the run finishes; then the frozen one wakes (SIGCONT)."""
    n = RESTART_RECORDS
    generate_csv(topo.data / "customers.csv", n)
    run_id = topo.trigger(topo.create("frozen", import_plan()))[1]["id"]
    number, executor, _ = _await_batches(topo, run_id, "to_file", 5)
    role = executor.split(":")[0]
    pid = topo.pid_of(role)
    os.kill(pid, signal.SIGSTOP)
    frozen_at = now_utc()
    run = topo.wait_run(run_id, timeout=900)
    query = "SELECT batches_done, outcome FROM attempts WHERE run_id = %s AND step_name = %s"
    frozen = topo.sql(query + " AND number = %s", run_id, "to_file", number)[0]
    os.kill(pid, signal.SIGCONT)
    woke_at = now_utc()
    gave_up = topo.wait_for(
        lambda: _stale_gave_up(topo, role, run_id),
        timeout=120, what="the woken executor notices its lease is gone",
    )  # fmt: skip
    time.sleep(1)  # whatever it still does after noticing, it has done by now
    res.add_run("run whose file-export executor was frozen past its lease", run)
    res.expect("run", run["status"], RunStatus.SUCCEEDED)
    step = _step(run, "to_file")
    res.expect("frozen attempt's outcome", frozen[1], LEASE_EXPIRED)
    res.expect(
        "to_file attempt outcomes",
        _outcomes(step),
        [AttemptOutcome.LEASE_EXPIRED, AttemptOutcome.SUCCEEDED],
    )
    after = topo.sql(query + " AND number = %s", run_id, "to_file", number)[0]
    res.expect("batches the stale executor committed after waking", after[0] - frozen[0], 0)
    res.expect(
        "files the stale executor left (export dir and stage)",
        _export_leftovers(topo, run_id, ["customers.jsonl"]),
        [],
    )
    _check_exports(topo, res, run, n, jsonl=True)
    res.expect("live executor processes (the woken one stays up)", topo.pid_of(role), pid)
    takeover = (step["attempts"] + [{}, {}])[1]
    res.figures["recovery"] = {
        "process": role,
        "pid": pid,
        "frozen_at": iso(frozen_at),
        "lease_reaped_at": step["attempts"][0]["finished_at"],
        "resumed_at": takeover.get("started_at"),
        "resumed_on": takeover.get("executor"),
        "run_finished_at": run["finished_at"],
        "woken_at": iso(woke_at),
        "frozen_to_resumed_s": seconds(frozen_at, takeover.get("started_at")),
        "woken_executor_said": gave_up,
    }


def drill_connections_cut(topo: Topology, res: DrillResult, records: int) -> None:
    """Every backend of the executor running the table export is terminated
    (`pg_terminate_backend`) mid-step; the executor reconnects and the step goes on."""
    n = RESTART_RECORDS
    generate_csv(topo.data / "customers.csv", n)
    run_id = topo.trigger(topo.create("cut", import_plan(jsonl=False)))[1]["id"]
    _, executor, done = _await_batches(topo, run_id, "to_table", 5)
    role = executor.split(":")[0]
    cut = topo.sql(
        "SELECT application_name, pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND application_name LIKE %s",
        f"etl-{role}%",
    )
    cut_at = now_utc()
    resumed_at = _await_resumed(topo, run_id, "to_table")
    run = topo.wait_run(run_id, timeout=900)
    res.add_run("run whose export executor lost all its connections", run)
    res.expect("run", run["status"], RunStatus.SUCCEEDED)
    step = _step(run, "to_table")
    res.check("backends terminated (state, sandbox, heartbeat, broker)", len(cut) >= 3, cut)
    res.check(
        "to_table resumed without waiting out its lease (no lease_expired attempt)",
        LEASE_EXPIRED not in _outcomes(step),
        _outcomes(step),
    )
    _check_exports(topo, res, run, n, jsonl=False)
    _check_quiet(topo, res)
    res.figures["recovery"] = {
        "executor": executor,
        "batches_committed_before": done,
        "backends_terminated": sorted(name for name, _ in cut),
        "cut_at": iso(cut_at),
        "step_resumed_at": resumed_at,
        "cut_to_step_resumed_s": seconds(cut_at, resumed_at),
        "cut_to_run_finished_s": seconds(cut_at, run["finished_at"]),
        "to_table_attempts": _outcomes(step),
    }


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
}
DRILLS = tuple(SCENARIOS)
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
PRIVATE_CLUSTER = {"postgres-restart"}  # drills that restart PostgreSQL: never the user's
RESTART_RECORDS = 20_000  # 40 batches


def run_one(name: str, *, fast: bool, records: int) -> DrillResult:
    """Run drill `name` on its own topology; never raises (an error fails the drill)."""
    cluster = PrivateCluster() if name in PRIVATE_CLUSTER else None
    env = {"ETL_FAULT": FAULTS[name]} if name in FAULTS else {}
    topo = Topology(name, fast=fast, env=env, cluster=cluster)
    command = f".venv/bin/etl drill {name}" + (" --fast" if fast else "")
    if name == "import-100k" and records != 100_000:
        command += f" --records {records}"
    res = DrillResult(name, command, topo.topology_env)
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
    print(f"drill {name}: {'PASS' if res.passed else 'FAIL'} in {res.duration_s} s", flush=True)
    for c in res.checks:
        print(f"  {'ok  ' if c['passed'] else 'FAIL'} {c['check']}  [{c['detail'][:120]}]")
    return res


def configure_drill(parser: argparse.ArgumentParser) -> None:
    """`etl drill NAME [--records N] [--fast | --production-timings] [--report-dir DIR]`."""
    parser.add_argument("name", choices=[*DRILLS, "all", "ci"], metavar="NAME",
                        help=f"one of {', '.join(DRILLS)}; all; ci (= all --fast)")  # fmt: skip
    parser.add_argument("--records", type=int, default=100_000, help="size of import-100k")
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
    sys.exit(run_drill(_parser.parse_args()))
