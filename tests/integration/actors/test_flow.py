"""The execution engine end to end on real processes: coordinator (gunicorn, advancer, sweep)
and two executors over the dramatiq-pg broker, on a test's own database."""

from __future__ import annotations

import csv
import io
import json
import time
import zlib
from datetime import datetime
from pathlib import Path

import pytest

from dag import BATCH_SIZE, DIGEST_SEED, chain_rows, encode_rows
from drills import Stack

# the `stack` fixture (tests/integration/conftest.py): env from an indirect parameter


def _people_csv(n: int) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["id", "name", "amount", "day", "status"])
    for i in range(1, n + 1):
        name = f"  Person\n  {i}  " if i % 7 == 0 else f"Person {i}, the {i % 3}th"
        w.writerow([i, name, i * 10, f"2024-01-{(i % 28) + 1:02d}", "A" if i % 2 else "I"])
    return out.getvalue()


def _expected(n: int) -> list[dict]:
    """The 4-step pipeline's result computed independently of the engine."""
    rows = list(csv.DictReader(io.StringIO(_people_csv(n))))
    out = []
    for r in rows:
        if r["status"] != "A":
            continue
        name = " ".join(r["name"].split())
        out.append(
            {
                "id": int(r["id"]),
                "name": name,
                "amount": int(r["amount"]),
                "day": r["day"],
                "status": "A",
                "label": "active",
            }
        )
    return out


FOUR_STEPS = {
    "on_failure": "stop_dependents",
    "on_row_error": "stop",
    "steps": [
        {"name": "read", "type": "ingest",
         "config": {"source": "file", "path": "people.csv", "format": "csv",
                    "columns": {"id": "int", "amount": "int", "day": "date"}}},
        {"name": "clean", "type": "transform", "depends_on": ["read"],
         "config": {"op": "normalize_whitespace", "columns": ["name"]}},
        {"name": "active", "type": "transform", "depends_on": ["clean"],
         "config": {"op": "filter_eq", "column": "status", "value": "A"}},
        {"name": "label", "type": "transform", "depends_on": ["active"],
         "config": {"op": "map", "column": "status", "mapping": {"A": "active"},
                    "into": "label"}},
        {"name": "out", "type": "export", "depends_on": ["label"],
         "config": {"target": "file", "path": "people.jsonl", "format": "jsonl"}},
    ],
}  # fmt: skip


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize(
    "stack", [{}, {"ETL_FUSION": "0"}], indirect=True, ids=["fused", "unfused"]
)
def test_pipeline_end_to_end_matches_independent_computation(stack: Stack) -> None:
    n = 1234
    (stack.data / "people.csv").write_text(_people_csv(n))
    stack.start()
    pid = stack.create("people", FOUR_STEPS)
    code, run = stack.trigger(pid, "e2e-1")
    assert code == 201, run
    run = stack.wait_run(run["id"])
    assert run["status"] == "succeeded", json.dumps(run, indent=1)
    steps = {s["name"]: s for s in run["steps"]}
    expected = _expected(n)
    assert steps["read"]["records_in"] == n and steps["read"]["records_out"] == n
    assert steps["read"]["columns"] == {
        "id": "int", "name": "string", "amount": "int", "day": "date", "status": "string",
    }  # fmt: skip
    assert steps["active"]["records_out"] == len(expected)
    assert steps["out"]["records_out"] == len(expected)
    assert all(s["attempts"][0]["executor"].startswith("executor-") for s in run["steps"])
    assert _jsonl(stack.exports / run["id"] / "people.jsonl") == expected
    # same step, same input -> same digests: a second run reproduces them
    code, run2 = stack.trigger(pid, "e2e-2")
    run2 = stack.wait_run(run2["id"])
    for s2 in run2["steps"]:
        assert s2["input_digest"] == steps[s2["name"]]["input_digest"]
        assert s2["output_digest"] == steps[s2["name"]]["output_digest"]
    # every step's digests are those of its records computed independently, fused or not
    for name, digest in _expected_digests(n).items():
        assert steps[name]["output_digest"] == digest, name
    # the output digest covers the very bytes a step stored (so they can be checked again
    # from storage), and an export that passes its input on digests the bytes it read
    fused = stack.env.get("ETL_FUSION") != "0"
    stored_steps = {r[0] for r in stack.sql("SELECT DISTINCT step_name FROM step_batches")}
    assert stored_steps == (set() if fused else {"read", "clean", "active", "label"})
    for name in stored_steps:
        stored = _stored_digest(stack, run["id"], name, list(steps[name]["columns"]))
        assert stored == steps[name]["output_digest"], name
    if fused:  # one pass: every follower ran inside the attempt of `read`
        assert {s["attempts"][0]["executor"] for s in run["steps"]} == {
            steps["read"]["attempts"][0]["executor"]
        }
    assert steps["out"]["output_digest"] == steps["label"]["output_digest"]
    assert steps["clean"]["input_digest"] == steps["read"]["output_digest"]


def _expected_digests(n: int) -> dict[str, str]:
    """Each step's output digest computed from the input file, batch by batch (500 input
    records per batch), without the engine."""
    rows = list(csv.DictReader(io.StringIO(_people_csv(n))))
    stages: dict[str, list[list[dict]]] = {"read": [], "clean": [], "active": [], "label": []}
    for i in range(0, len(rows), BATCH_SIZE):
        read = [
            {**r, "id": int(r["id"]), "amount": int(r["amount"])} for r in rows[i : i + BATCH_SIZE]
        ]
        clean = [{**r, "name": " ".join(r["name"].split())} for r in read]
        active = [r for r in clean if r["status"] == "A"]
        label = [{**r, "label": "active"} for r in active]
        for name, batch in zip(stages, (read, clean, active, label), strict=True):
            stages[name].append(batch)
    digests = {}
    for name, batches in stages.items():
        names = list(batches[0][0])
        digest = DIGEST_SEED
        for batch in batches:
            digest = chain_rows(digest, names, encode_rows(batch, names) if batch else None)
        digests[name] = digest
    return digests


def _stored_digest(stack: Stack, run_id: str, step: str, names: list[str]) -> str:
    query = "SELECT payload FROM step_batches WHERE run_id = %s AND step_name = %s ORDER BY seq"
    digest = DIGEST_SEED
    for (payload,) in stack.sql(query, run_id, step):
        digest = chain_rows(digest, names, zlib.decompress(payload))
    return digest


@pytest.mark.parametrize(
    "stack", [{"ETL_FAULT": "fail_attempts:step=clean:times=2"}], indirect=True
)
def test_transient_failure_twice_then_success_takes_three_attempts(stack: Stack) -> None:
    (stack.data / "people.csv").write_text(_people_csv(10))
    stack.start()
    pid = stack.create("people", FOUR_STEPS)
    run = stack.wait_run(stack.trigger(pid)[1]["id"])
    assert run["status"] == "succeeded", run
    clean = next(s for s in run["steps"] if s["name"] == "clean")
    attempts = clean["attempts"]
    assert [a["outcome"] for a in attempts] == ["failed", "failed", "succeeded"]
    starts = [datetime.fromisoformat(a["started_at"]) for a in attempts]
    ends = [datetime.fromisoformat(a["finished_at"]) for a in attempts]
    assert (starts[1] - ends[0]).total_seconds() >= 1.0
    assert (starts[2] - ends[1]).total_seconds() >= 2.0


def test_input_data_error_fails_after_one_attempt_with_line_and_column(stack: Stack) -> None:
    text = _people_csv(5).replace("\n3,", "\n3x,", 1)
    (stack.data / "people.csv").write_text(text)
    stack.start()
    pid = stack.create("people", FOUR_STEPS)
    run = stack.wait_run(stack.trigger(pid)[1]["id"])
    assert run["status"] == "failed"
    steps = {s["name"]: s for s in run["steps"]}
    read = steps["read"]
    assert [a["outcome"] for a in read["attempts"]] == ["input_error"]
    assert "line 4" in read["error"] and "'id'" in read["error"], read["error"]
    assert {steps[n]["status"] for n in ("clean", "active", "label", "out")} == {"upstream_failed"}


@pytest.mark.parametrize(
    "stack",
    [{"ETL_STEP_TIMEOUT_S": "1", "ETL_FAULT": "slow_batches:step=read:ms=1500"}],
    indirect=True,
)
def test_step_timeout_is_retried_then_fails(stack: Stack) -> None:
    (stack.data / "people.csv").write_text(_people_csv(1200))
    stack.start()
    plan = json.loads(json.dumps(FOUR_STEPS))
    plan["steps"][0]["retry"] = {"max_attempts": 2}
    pid = stack.create("people", plan)
    run = stack.wait_run(stack.trigger(pid)[1]["id"])
    read = next(s for s in run["steps"] if s["name"] == "read")
    assert run["status"] == "failed"
    assert [a["outcome"] for a in read["attempts"]] == ["timeout", "timeout"]
    assert "timed out" in read["error"]


def _branches(policy: str) -> dict:
    return {
        "on_failure": policy,
        "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "people.csv", "columns": {"id": "int"}}},
            {"name": "bad", "type": "transform", "depends_on": ["read"],
             "retry": {"max_attempts": 1},
             "config": {"op": "trim", "columns": ["name"]}},
            {"name": "bad_out", "type": "export", "depends_on": ["bad"],
             "config": {"target": "file", "path": "bad.jsonl"}},
            {"name": "good", "type": "transform", "depends_on": ["read"],
             "config": {"op": "trim", "columns": ["name"]}},
            {"name": "good_slow", "type": "transform", "depends_on": ["good"],
             "config": {"op": "trim", "columns": ["name"]}},
            {"name": "good_out", "type": "export", "depends_on": ["good_slow"],
             "config": {"target": "file", "path": "good.jsonl"}},
        ],
    }  # fmt: skip


BRANCH_FAULTS = "slow_batches:step=good:ms=400,fail_attempts:step=bad:times=1"


@pytest.mark.parametrize(
    "stack",
    [{"ETL_FAULT": BRANCH_FAULTS}, {"ETL_FAULT": BRANCH_FAULTS, "ETL_FUSION": "0"}],
    indirect=True,
    ids=["fused", "unfused"],
)
def test_policies_on_a_failing_branch_and_resume_reruns_only_it(stack: Stack) -> None:
    fused = stack.env.get("ETL_FUSION") != "0"
    (stack.data / "people.csv").write_text(_people_csv(20))
    stack.start()
    # continue_independent: the good branch runs to the end.
    pid = stack.create("ci", _branches("continue_independent"))
    run = stack.wait_run(stack.trigger(pid)[1]["id"])
    st = {s["name"]: s["status"] for s in run["steps"]}
    assert run["status"] == "failed"
    assert st == {
        "read": "succeeded", "bad": "failed", "bad_out": "upstream_failed",
        "good": "succeeded", "good_slow": "succeeded", "good_out": "succeeded",
    }  # fmt: skip
    # stop_dependents: nothing new starts after the failure; what runs finishes. Fused, the
    # whole tree under `read` started with it, before `bad` failed: the good branch is one
    # started group and finishes; unfused, only `good` was running.
    pid2 = stack.create("sd", _branches("stop_dependents"))
    run2 = stack.wait_run(stack.trigger(pid2)[1]["id"])
    st2 = {s["name"]: s["status"] for s in run2["steps"]}
    assert st2["bad"] == "failed" and st2["bad_out"] == "upstream_failed"
    assert st2["good"] == "succeeded"  # it was running when `bad` failed
    rest = "succeeded" if fused else "not_run"
    assert st2["good_slow"] == rest and st2["good_out"] == rest
    failed_at = next(s for s in run2["steps"] if s["name"] == "bad")["attempts"][-1]["finished_at"]
    # a step starts when the advancer dispatches it or a group adopts it (its claim may come
    # later)
    began = [s["started_at"] for s in run2["steps"] if s["started_at"]]
    assert all(b <= failed_at for b in began), (began, failed_at)
    if fused:
        into = {s["name"]: s["attempts"][0]["fused_into"] for s in run2["steps"] if s["attempts"]}
        assert into == {"read": None, "bad": "read", "bad_out": "read", "good": "read",
                        "good_slow": "read", "good_out": "read"}  # fmt: skip
    # resume re-runs failed, upstream_failed and not_run steps; succeeded ones keep theirs.
    before = {s["name"]: s["attempts"] for s in run2["steps"]}
    code, body = stack.req("POST", f"/runs/{run2['id']}/resume")
    assert code == 202, body
    run3 = stack.wait_run(run2["id"], until=("failed", "succeeded"))
    assert run3["status"] == "succeeded", run3
    after = {s["name"]: s for s in run3["steps"]}
    for name in ("read", "good", *(("good_slow", "good_out") if fused else ())):
        assert after[name]["attempts"] == before[name], name
    assert [a["outcome"] for a in after["bad"]["attempts"]] == ["failed", "succeeded"]
    for name in ("bad_out", *(() if fused else ("good_slow", "good_out"))):
        step = after[name]
        # fused, bad_out was adopted with `bad` and handed back (released) when it failed
        want = ["released", "succeeded"] if fused and name == "bad_out" else ["succeeded"]
        assert step["status"] == "succeeded", step
        assert [a["outcome"] for a in step["attempts"]] == want, step


def test_cancel_queued_and_running_and_fifo_order(stack: Stack) -> None:
    (stack.data / "people.csv").write_text(_people_csv(3000))
    stack.env["ETL_FAULT"] = "slow_batches:step=read:ms=300"
    stack.start()
    pid = stack.create("people", FOUR_STEPS)
    ids = [stack.trigger(pid, f"k{i}")[1]["id"] for i in range(4)]
    assert [stack.run(i)["status"] for i in ids[1:]] == ["queued"] * 3
    code, body = stack.req("POST", f"/runs/{ids[2]}/cancel")
    assert code == 202 and body["status"] == "canceled"
    stack.wait_for(lambda: stack.run(ids[0])["status"] == "running", what="first run running")
    stack.wait_for(
        lambda: any(s["records_in"] for s in stack.run(ids[0])["steps"]), what="first batch"
    )
    code, body = stack.req("POST", f"/runs/{ids[0]}/cancel")
    assert code == 202
    first = stack.wait_run(ids[0])
    assert first["status"] == "canceled"
    read = next(s for s in first["steps"] if s["name"] == "read")
    assert read["status"] == "canceled" and read["attempts"][-1]["outcome"] == "canceled"
    assert not (stack.exports / ids[0] / "people.jsonl").exists()
    second = stack.wait_run(ids[1], timeout=180)
    fourth = stack.wait_run(ids[3], timeout=180)
    assert second["status"] == fourth["status"] == "succeeded"
    assert second["started_at"] >= first["finished_at"]
    assert fourth["started_at"] >= second["finished_at"]
    canceled = stack.run(ids[2])
    assert canceled["status"] == "canceled"
    assert {s["status"] for s in canceled["steps"]} == {"canceled"}


def test_file_source_refusals_are_input_errors(stack: Stack, tmp_path: Path) -> None:
    outside = tmp_path / "secret.csv"
    outside.write_text("id\n1\n")
    (stack.data / "link.csv").symlink_to(outside)
    with open(stack.data / "big.csv", "wb") as f:
        f.truncate(50 * 1024 * 1024 + 1)
    stack.start()
    cases = {
        "link.csv": "leaves the data directory",
        "big.csv": "52428800",
        "missing.csv": "missing.csv",
    }
    runs = {}
    for i, path in enumerate(cases):
        plan = {"steps": [{"name": "read", "type": "ingest",
                           "config": {"source": "file", "path": path}}]}  # fmt: skip
        runs[path] = stack.trigger(stack.create(f"p{i}", plan))[1]["id"]
    code, body = stack.req(
        "POST", "/pipelines",
        {"name": "dots", "plan": {"steps": [{"name": "read", "type": "ingest",
                                  "config": {"source": "file", "path": "../x.csv"}}]}},
    )  # fmt: skip
    assert code == 400 and "plan.steps[0].config.path" in json.dumps(body)
    for path, run_id in runs.items():
        run = stack.wait_run(run_id)
        read = run["steps"][0]
        assert run["status"] == "failed"
        assert [a["outcome"] for a in read["attempts"]] == ["input_error"], read
        assert cases[path] in read["error"], read["error"]


def test_malformed_csv_in_reject_and_stop_modes(stack: Stack) -> None:
    text = 'id,name,amount\n1,a,10\n2,"b\nb",x20\n3,c\n4,"d""",40\n5,e,50\n'
    (stack.data / "bad.csv").write_text(text)
    stack.start()

    def plan(mode: str) -> dict:
        return {"on_row_error": mode, "steps": [
            {"name": "read", "type": "ingest",
             "config": {"source": "file", "path": "bad.csv", "columns": {"amount": "int"}}},
            {"name": "out", "type": "export", "depends_on": ["read"],
             "config": {"target": "file", "path": "out.jsonl"}}]}  # fmt: skip

    run = stack.wait_run(stack.trigger(stack.create("reject", plan("reject")))[1]["id"])
    assert run["status"] == "succeeded"
    read = run["steps"][0]
    assert (read["records_in"], read["records_out"], read["rejected"]) == (5, 3, 2)
    rejects = _jsonl(stack.rejects / run["id"] / "read.jsonl")
    assert [(r["line"], r["column"]) for r in rejects] == [(3, "amount"), (5, None)]
    assert all(r["reason"] and r["raw"] for r in rejects)
    out = _jsonl(stack.exports / run["id"] / "out.jsonl")
    assert [r["name"] for r in out] == ["a", 'd"', "e"]

    run = stack.wait_run(stack.trigger(stack.create("stop", plan("stop")))[1]["id"])
    read = run["steps"][0]
    assert run["status"] == "failed"
    assert [a["outcome"] for a in read["attempts"]] == ["input_error"]
    assert "line 3" in read["error"] and "amount" in read["error"]
    time.sleep(0)  # nothing else to wait for: the failed step published nothing
    assert not (stack.exports / run["id"] / "out.jsonl").exists()


@pytest.mark.parametrize(
    "stack", [{"ETL_FAULT": "fail_attempts:step=clean:times=4"}], indirect=True
)
def test_resume_gives_a_failed_step_a_fresh_retry_budget(stack: Stack) -> None:
    (stack.data / "people.csv").write_text(_people_csv(10))
    stack.start()
    run = stack.wait_run(stack.trigger(stack.create("people", FOUR_STEPS))[1]["id"])
    clean = next(s for s in run["steps"] if s["name"] == "clean")
    assert run["status"] == "failed" and len(clean["attempts"]) == 3
    assert stack.req("POST", f"/runs/{run['id']}/resume")[0] == 202
    run = stack.wait_run(run["id"], timeout=60, until=("succeeded", "failed"))
    clean = next(s for s in run["steps"] if s["name"] == "clean")
    # attempt 4 (the first after the resume) fails, and is retried: the budget restarted
    assert [a["outcome"] for a in clean["attempts"]] == ["failed"] * 4 + ["succeeded"]
    assert run["status"] == "succeeded"
