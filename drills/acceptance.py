"""The acceptance drills, each on its own local topology (`etl up` on a fresh database):
an import of 100,000 records with an executor killed mid-step, a crash right after an
export, a coordinator restart, a burst of 30 triggers, a repeated trigger key, a failing
branch under both policies, a reject file."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

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
from drills.checks import (
    LEASE_EXPIRED,
    SKIPPED,
    SUCCEEDED,
    await_batches,
    batches_done,
    check_exports,
    outcomes,
    step_of,
)
from drills.harness import concurrently
from drills.report import DrillResult, parse_ts, seconds
from drills.topology import Topology
from drills.workload import COLUMNS, generate_csv, import_plan
from service.domain.schedules import trigger_key
from service.scheduler import Scheduler

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
    _, executor, _ = await_batches(topo, run_id, "to_table", max(1, n_batches // 3))
    kill = topo.kill_role(executor.split(":")[0])
    run = topo.wait_run(run_id, timeout=900)
    res.add_run("drill run: executor SIGKILLed mid-export", run)
    res.expect("drill run", run["status"], RunStatus.SUCCEEDED)
    step = step_of(run, "to_table")
    res.expect("to_table attempt outcomes", outcomes(step), [LEASE_EXPIRED, SUCCEEDED])
    check_exports(topo, res, run, n, jsonl=True)
    digests = {s["name"]: (s["input_digest"], s["output_digest"]) for s in run["steps"]}
    clean_digests = {s["name"]: (s["input_digest"], s["output_digest"]) for s in clean["steps"]}
    res.check("every step's digests equal the clean run's", digests == clean_digests, "")
    counts = {(s["records_in"], s["records_out"]) for s in run["steps"]}
    res.expect("records in/out of every step", counts, {(n, n)})
    done = batches_done(topo, run_id, "to_table")
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
    step = step_of(run, "to_table")
    res.expect("to_table attempt outcomes", outcomes(step), [LEASE_EXPIRED, SUCCEEDED])
    check_exports(topo, res, run, n, jsonl=False)
    done = batches_done(topo, run["id"], "to_table")
    res.expect("to_table batches_done per attempt", done, [2, 8])
    counters = (step["records_in"], step["records_out"], step["rejected"])
    res.expect("to_table records in, out, rejected", counters, (n, n, 0))
    same = step["output_digest"] == step_of(run, "normalize")["output_digest"]
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
    await_batches(topo, run_id, "normalize", 2)
    kill = topo.kill_role("coordinator")
    run = topo.wait_run(run_id)
    res.add_run("run with the coordinator SIGKILLed", run)
    res.expect("run", run["status"], RunStatus.SUCCEEDED)
    attempts = {s["name"]: outcomes(s) for s in run["steps"]}
    res.expect("attempt outcomes", attempts, {n: [SUCCEEDED] for n in attempts})
    check_exports(topo, res, run, 5000, jsonl=False)
    time.sleep(8)  # long enough for a crash-looping coordinator to show
    roles = Counter(topo.processes().values())
    exits = topo.log_tail(10**8).count("coordinator exited")
    res.expect("'coordinator exited' lines in up.log (1 = restarted once, stays up)", exits, 1)
    masters = (roles["coordinator"], roles["gunicorn master"])
    res.expect("live coordinators, live gunicorn masters", masters, (1, 1))
    res.expect("orphaned processes", sorted(r for r in roles if "orphan" in r), [])
    next_step = step_of(run, "to_table")["started_at"]
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
    for policy in (CONTINUE_INDEPENDENT, STOP_DEPENDENTS):
        pipeline = topo.create(f"branch-{policy}", _branch_plan(policy))
        run = topo.wait_run(topo.trigger(pipeline)[1]["id"])
        res.add_run(f"{policy}: first run", run)
        res.expect(f"{policy}: run status", run["status"], RunStatus.FAILED)
        states = {s["name"]: s["status"] for s in run["steps"]}
        # stop_dependents: a2 runs only when it started before b_fail failed, i.e. in a fused
        # group that began earlier; nothing outside started groups begins after the failure
        started = bool(step_of(run, "a2")["attempts"])
        a2 = (
            StepStatus.SUCCEEDED
            if policy == CONTINUE_INDEPENDENT or started
            else StepStatus.NOT_RUN
        )
        res.expect(f"{policy}: step states", states, {**branch_a, "a2": a2, **branch_b})
        if policy == STOP_DEPENDENTS:
            _nothing_began_after(res, run, "b_fail")
        ran = lambda r, n: (step_of(r, n)["attempts"], step_of(r, n)["output_digest"])  # noqa: E731
        kept = {n: ran(run, n) for n, state in states.items() if state == StepStatus.SUCCEEDED}
        code = topo.call("POST", f"/runs/{run['id']}/resume")[0]
        res.expect(f"{policy}: POST /runs/{{id}}/resume", code, 202)
        after = topo.wait_run(run["id"])
        res.add_run(f"{policy}: after the resume", after)
        res.expect(f"{policy}: resumed run", after["status"], RunStatus.SUCCEEDED)
        same = {n: ran(after, n) for n in kept} == kept
        res.check(f"{policy}: succeeded steps kept their attempts and output", same, sorted(kept))
        rerun = {s["name"]: outcomes(s) for s in after["steps"] if s["name"] not in kept}
        # the resume adds one succeeded attempt to each step it re-runs (b_fail's first one
        # failed; b_down's, fused, was handed back `released` when b_fail failed)
        want = {n: [*outcomes(step_of(run, n)), SUCCEEDED] for n in rerun}
        res.expect(f"{policy}: attempts of the re-run steps", rerun, want)


def _nothing_began_after(res: DrillResult, run: dict, failed: str) -> None:
    """No step began after `failed`'s failure (a step begins when the advancer dispatches
    it or a fused group adopts it; its attempt's claim may come later)."""
    failed_at = parse_ts(step_of(run, failed)["attempts"][-1]["finished_at"])
    late = [f"{s['name']} at {s['started_at']}" for s in run["steps"]
            if s["started_at"] and parse_ts(s["started_at"]) > failed_at]  # fmt: skip
    fused = {s["name"]: s["attempts"][0]["fused_into"] for s in run["steps"] if s["attempts"]}
    res.check(f"stop_dependents: no step began after {failed} failed", not late,
              f"late: {late}; fused into: {fused}")  # fmt: skip


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
        read = step_of(run, "read")
        path = topo.rejects / run["id"] / "read.jsonl"
        if mode == "stop":
            states = (run["status"], read["status"], step_of(run, "out")["status"])
            failed = (RunStatus.FAILED, StepStatus.FAILED, StepStatus.UPSTREAM_FAILED)
            res.expect("stop: run, read, out", states, failed)
            res.expect("stop: read attempt outcomes", outcomes(read), [AttemptOutcome.INPUT_ERROR])
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
